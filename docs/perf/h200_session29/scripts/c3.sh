#!/usr/bin/env bash
# Session 29 call 3: tools/stream_ceiling.py --chain twice at 6d837c1 with the isolating variants (shared memory,
# output), K/4 and K/8 activation slices and the fused op's diagnostic flags 1, 5 and 7.
set -u
SECONDS=0
D=$OUT/c3; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
for r in 1 2; do
L=72; [ $r = 1 ] && L=24
SGL_FP8_GIT=6d837c1 timeout 250 python3 tools/stream_ceiling.py --chain --out $D/chain$r > $D/chain$r.txt 2>&1
echo "chain$r rc=$? ${SECONDS}s"; grep -v "^\[" $D/chain$r.txt | grep -v "^  N=" | grep -v building | tail -$L
done
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
