#!/usr/bin/env bash
# Session 39 call 5: verify c622d76 (66ba02c's register-fed machine code: scales at entry, two blocks in flight; call 2's
# table): the GPU suite, memcheck and racecheck (quick) over tools/sanitize_smoke.py; then the probe's kQuantize GEMM
# (variant 8192) beside the fused op's register-fed kernel at 1-2 tokens.
set -u
SECONDS=0
MAX_JOBS=16 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
nvidia-smi --query-gpu=uuid,pci.bus_id,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader | tee $OUT/gpu_identity.txt
D=$OUT/verify; mkdir -p $D
timeout 280 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 270 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 270 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head -10
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
(cd $OUT && tar czf c5.tgz verify build.log gpu_identity.txt)
L=$((440 - SECONDS)); [ $L -gt 120 ] && L=120
if [ $L -gt 60 ]; then SGL_FP8_GIT=c622d76 timeout $L python3 tools/regmma_probe.py --ms 1,2 --variants 8192 --out $D/probe > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"; grep -E "^us|^[0-9]+x|geometric" $D/probe.txt | tail -12; fi
cd $OUT && tar czf c5.tgz verify build.log gpu_identity.txt && rm -rf verify build.log
