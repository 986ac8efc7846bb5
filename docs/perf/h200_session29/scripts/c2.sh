#!/usr/bin/env bash
# Session 29 call 2: tools/stream_ceiling.py --chain twice at e00e2b8 (two runs: the noise), with the bulk
# reference, the weight alone in 32-thread CTAs and the whole order in small CTAs.
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
for r in 1 2; do
SGL_FP8_GIT=e00e2b8 timeout 250 python3 tools/stream_ceiling.py --chain --out $D/chain$r > $D/chain$r.txt 2>&1
echo "chain$r rc=$? ${SECONDS}s"; grep -v "^\[" $D/chain$r.txt | grep -v "^  N=" | grep -v building | tail -52
done
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
