#!/usr/bin/env bash
# Session 36 call 5: stream_ceiling --ldg-residency with 2-6 CTAs an SM, as they are and capped.
set -u
SECONDS=0
D=$OUT/c5; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 300 python3 tools/stream_ceiling.py --ldg-residency --out $D/residency > $D/residency.txt 2>&1; echo "residency rc=$? ${SECONDS}s"
grep -E "^N=|^ldg|^bulk|WARN|note|rror" $D/residency.txt | tail -60
cd $OUT && tar czf c5.tgz c5 && rm -rf c5
