#!/usr/bin/env bash
# Session 32 call 8: --chain-consume with the weight copies' bytes random (as calls 1-7) and as bench's
# weights (e4m3 of 0.5 x normal draws), back to back, on one H200: does the tensor pipe's rate in the
# skeleton depend on the data it multiplies?
set -u
SECONDS=0
D=$OUT/c8; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 120 python3 tools/stream_ceiling.py --chain-consume --out $D/random > $D/random.txt 2>&1; echo "random rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 120 python3 tools/stream_ceiling.py --chain-consume --pool e4m3 --out $D/e4m3 > $D/e4m3.txt 2>&1; echo "e4m3 rc=$? ${SECONDS}s"
python3 .s32/summ.py $D/random/stream_ceiling.json $D/e4m3/stream_ceiling.json | cut -c1-190
