#!/usr/bin/env bash
# Session 33 call 4: --chain-timed --after copy (a copy kernel writes the activations before every launch, as
# in a decode step) with call 3's tool: does the producer warp's gain back to back survive there?
set -u
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 200 python3 tools/stream_ceiling.py --chain-timed --after copy --out $D/copy > $D/copy.txt 2>&1; echo "copy rc=$? ${SECONDS}s"
python3 .s33/summ.py $D/copy/stream_ceiling.json > $D/copy_summary.txt 2>&1
python3 .s33/geo.py $D/copy/stream_ceiling.json
