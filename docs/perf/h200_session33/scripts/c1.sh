#!/usr/bin/env bash
# Session 33 call 1: --chain-timed (copies requested on a clock by a producer warp), back to back as bench,
# then --after copy (a decode step's order), on one H200.
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 200 python3 tools/stream_ceiling.py --chain-timed --out $D/b2b > $D/b2b.txt 2>&1; echo "b2b rc=$? ${SECONDS}s"
python3 .s33/summ.py $D/b2b/stream_ceiling.json > $D/b2b_summary.txt 2>&1
cut -c1-260 $D/b2b_summary.txt | head -60
SGL_FP8_GIT=$GIT timeout 200 python3 tools/stream_ceiling.py --chain-timed --after copy --out $D/copy > $D/copy.txt 2>&1; echo "copy rc=$? ${SECONDS}s"
python3 .s33/summ.py $D/copy/stream_ceiling.json > $D/copy_summary.txt 2>&1
tail -5 $D/b2b.txt
