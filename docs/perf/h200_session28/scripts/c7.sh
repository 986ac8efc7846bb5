#!/usr/bin/env bash
# Session 28 call 7: the landed head (39d57bc; kernels and plan as 96d32ea): the GPU suite, memcheck,
# racecheck (quick), tools/stream_ceiling.py --late-boxes (the review commit's Python half, not yet
# run on a GPU), and bench.
set -u
SECONDS=0
D=$OUT/c7; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 240 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 235 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 235 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
SGL_FP8_GIT=39d57bc timeout 120 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -22 $D/bench.txt
timeout $((585 - SECONDS)) python3 tools/stream_ceiling.py --late-boxes --out $D/late_boxes > $D/late_boxes.txt 2>&1; echo "late boxes rc=$? ${SECONDS}s"; grep -i -E "checksum|ok|bad|mismatch" $D/late_boxes.txt | tail -5
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
