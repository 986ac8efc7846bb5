#!/usr/bin/env bash
# Session 38 call 4: binary against binary, 59f0d1c (before the register-fed kernel), 202da8b (the register-fed kernel
# with its dynamic shared memory limit fitted to its launches) and 356f531 (and its CTAs along grid.x); 2 rounds of
# ab_none and ab_copy on the 7 SPEC §6 shapes at 1-2 tokens (fp32); then in 356f531's tree the GPU suite, memcheck
# and racecheck (quick), bench, and the decode step of 59f0d1c and 356f531 once each if time is left.
set -u
SECONDS=0
export SGL_FP8_AB_SHAPES=5120x4096,4608x4096,4096x2048,8192x1024,4096x1024,1536x4096,2112x7168
export SGL_FP8_AB_MS=1,2 SGL_FP8_AB_SCALES=fp32
bash tools/binary_ab.sh 2 59f0d1c=.ab/59f0d1c.tar 202da8b=.ab/202da8b.tar 356f531=.ab/356f531.tar \
  -- ab_none ab_copy > $OUT/binary_ab.txt 2>&1
echo "binary_ab rc=$? ${SECONDS}s"; grep -v "^round" $OUT/binary_ab.txt | tail -34
cd /tmp/binary_ab/356f531
D=$OUT/verify; mkdir -p $D
timeout 200 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 190 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 190 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head -10
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
(cd $OUT && tar czf c4.tgz binary_ab binary_ab.txt verify)
L=$((575 - SECONDS)); [ $L -gt 110 ] && L=110
if [ $L -gt 60 ]; then SGL_FP8_GIT=356f531 timeout $L python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -40 $D/bench.txt; fi
for v in 356f531 59f0d1c; do
  L=$((585 - SECONDS)); [ $L -lt 30 ] && break
  (cd /tmp/binary_ab/$v && PYTHONPATH=. timeout $L python3 tools/e2e_decode_bench.py --batches 1,2 --replays 30 --out $D/e2e_$v.json > $D/e2e_$v.txt 2>&1; echo "e2e $v rc=$? ${SECONDS}s"; tail -3 $D/e2e_$v.txt)
done
cd $OUT && tar czf c4.tgz binary_ab binary_ab.txt verify
