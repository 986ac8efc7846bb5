#!/usr/bin/env bash
# Session 30 call 7 at 0e86781: --chain-mma in a decode step's order (a copy kernel that writes the
# activations before every launch), and back to back once more (the new order: loads ahead of every copy).
set -u
SECONDS=0
D=$OUT/c7; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=0e86781 timeout 250 python3 tools/stream_ceiling.py --chain-mma --after copy --out $D/copy > $D/copy.txt 2>&1
echo "copy rc=$? ${SECONDS}s"
SGL_FP8_GIT=0e86781 timeout 250 python3 tools/stream_ceiling.py --chain-mma --out $D/none > $D/none.txt 2>&1
echo "none rc=$? ${SECONDS}s"
for f in copy none; do grep -c MISMATCH $D/$f.txt; done
