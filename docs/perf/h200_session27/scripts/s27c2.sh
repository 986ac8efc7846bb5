#!/usr/bin/env bash
# Session 27 call 2: stream_ceiling --split-free (plans without a K split: the copies alone) and a
# second --late-boxes run, on the landed kernels (c9fc7bc) with the session's tool changes.
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
for r in 1 2; do
  timeout 150 python3 tools/stream_ceiling.py --split-free --out $D/split_free$r > $D/split_free$r.txt 2>&1; echo "split free $r rc=$? ${SECONDS}s"
  grep -v "^\[" $D/split_free$r.txt | grep "us \|tensor\|N=\|WARN\|rror" | tail -30
done
timeout 150 python3 tools/stream_ceiling.py --late-boxes --out $D/late > $D/late_boxes.txt 2>&1; echo "late boxes rc=$? ${SECONDS}s"
grep -v "^\[" $D/late_boxes.txt | grep "us \|tensor\|N=\|WARN" | tail -48
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
