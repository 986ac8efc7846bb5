#!/usr/bin/env bash
# Session 29 call 6: tools/stream_ceiling.py --chain at 4a7fe3d, with a variant that reads neither
# weight nor activations: what a launch costs with nothing to read.
set -u
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=4a7fe3d timeout 250 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -c WARNING $D/chain.txt
grep -E "^N=|^variant|^neither|^activations alone|^weight all at entry  |^fused default" $D/chain.txt
grep -A 30 "^geometric" $D/chain.txt
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
