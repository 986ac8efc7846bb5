#!/usr/bin/env bash
# Session 39 call 3: dd6063c's kernels with call 2's table: the GPU suite, compute-sanitizer memcheck and racecheck
# (quick) over tools/sanitize_smoke.py (which forces the register-fed kernel at 1, 13, 16 tokens).
set -u
SECONDS=0
MAX_JOBS=16 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
nvidia-smi --query-gpu=uuid,pci.bus_id,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader | tee $OUT/gpu_identity.txt
D=$OUT/verify; mkdir -p $D
timeout 300 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 290 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 290 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head -10
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
cd $OUT && tar czf c3.tgz verify build.log && rm -rf verify build.log
