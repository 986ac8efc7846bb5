#!/usr/bin/env bash
# Session 33 call 2: --chain-timed with call 1's variants and two controls (every copy at entry from the
# producer warp, with and without the consumer; the consumer in the fused kernel's order), back to back,
# twice on one H200.
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
for run in 1 2; do
  SGL_FP8_GIT=$GIT timeout 200 python3 tools/stream_ceiling.py --chain-timed --out $D/b2b$run > $D/b2b$run.txt 2>&1; echo "b2b$run rc=$? ${SECONDS}s"
  python3 .s33/summ.py $D/b2b$run/stream_ceiling.json > $D/b2b${run}_summary.txt 2>&1
done
grep -A3 "^-- 5120x4096 M=8" $D/b2b1_summary.txt | head -3
grep "producer warp\|^   weight all at entry  " $D/b2b1_summary.txt | cut -c1-200
