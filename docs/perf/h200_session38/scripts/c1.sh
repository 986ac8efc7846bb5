#!/usr/bin/env bash
# Session 38 call 1: the register-fed library kernel (default at 1-2 tokens) timed against the kernels'
# plan without it (flag 65536) and forced (flag 32768) on the SPEC §6 shapes at 1, 2, 4 tokens after a copy
# kernel; then the GPU suite, memcheck and racecheck (quick) over tools/sanitize_smoke.py.
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; rc=$?; echo "build rc=$rc ${SECONDS}s"
[ $rc != 0 ] && { tail -40 $D/build.log; cd $OUT && tar czf c1.tgz c1; exit 1; }
SGL_FP8_GIT=$GIT timeout 220 python3 tools/config_ab.py --shapes 5120x4096,4608x4096,4096x2048,8192x1024,4096x1024,1536x4096,2112x7168 \
  --ms 1,2,4 --scales fp32 --configs "default;[0,0,0,0,65536];[0,0,0,0,32768]" --after copy --out $D/ab_copy > $D/ab_copy.txt 2>&1
echo "config_ab rc=$? ${SECONDS}s"; tail -40 $D/ab_copy.txt
timeout 280 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 270 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 270 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -3 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head -20
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -3 $D/memcheck.txt; tail -3 $D/racecheck.txt
cd $OUT && tar czf c1.tgz c1
