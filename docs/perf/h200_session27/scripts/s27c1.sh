#!/usr/bin/env bash
# Session 27 call 1: stream_ceiling --late-boxes (the held-back copies in 1-2 block boxes, with and
# without the MMAs); then the stacked fifth tile in its own instance (cherry-pick of 7536131 on
# c9fc7bc): its tests, the GPU suite, memcheck, racecheck; config_ab stacked vs flag 32768, both orders.
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 150 python3 tools/stream_ceiling.py --late-boxes --out $D/late > $D/late_boxes.txt 2>&1; echo "late boxes rc=$? ${SECONDS}s"
grep -v "^\[" $D/late_boxes.txt | grep "us \|tensor\|N=\|WARN" | tail -60
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "stacked" > $D/pytest_stacked.txt 2>&1; echo "stacked tests rc=$? ${SECONDS}s"; tail -3 $D/pytest_stacked.txt
timeout 240 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 230 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 230 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
C="default;[0,0,0,0,32768];default;[0,0,0,0,32768]"
for after in none copy; do
  timeout $(( (585 - SECONDS) / 2 )) python3 tools/config_ab.py --shapes 5120x4096,4608x4096 --ms 1,2,3,4 --configs "$C" --after $after --out $D/ab_$after > $D/ab_$after.txt 2>&1
  echo "ab $after rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_$after.txt | grep "fp32\|bits\|failed" | tail -14
done
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
