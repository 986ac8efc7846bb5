#!/usr/bin/env bash
# Session 33 call 3: --chain-timed as call 2, with the producer-warp instances at one CTA an SM (call 2's
# 256-thread instance kept ~3 of 8 activation loads in flight), back to back, twice on one H200.
set -u
SECONDS=0
D=$OUT/c3; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
for run in 1 2; do
  SGL_FP8_GIT=$GIT timeout 200 python3 tools/stream_ceiling.py --chain-timed --out $D/b2b$run > $D/b2b$run.txt 2>&1; echo "b2b$run rc=$? ${SECONDS}s"
  python3 .s33/summ.py $D/b2b$run/stream_ceiling.json > $D/b2b${run}_summary.txt 2>&1
done
python3 .s33/geo.py $D/b2b1/stream_ceiling.json $D/b2b2/stream_ceiling.json
