#!/usr/bin/env bash
# Session 26 call 4: stream_ceiling --smem-reads with the wait-only and early-MMA consumers (twice).
set -u
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
for r in 1 2; do
  timeout 200 python3 tools/stream_ceiling.py --smem-reads --out $D/run$r > $D/smem_reads_run$r.txt 2>&1; echo "run$r rc=$? ${SECONDS}s"
  grep -v "^\[" $D/smem_reads_run$r.txt | tail -40
done
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
