#!/usr/bin/env bash
# Session 40 call 1 at c6f0e91 (the landed head; d8dfd3e's kernels, later commits docs/comments only, 47 kernels byte for
# byte d8dfd3e's): the GPU suite, compute-sanitizer memcheck and racecheck (quick) over tools/sanitize_smoke.py, then
# `bench` (fp32 and e8m0), then the probe's kQuantize GEMM (variant 8192) beside the fused op's register-fed kernel.
set -u
SECONDS=0
GIT=c6f0e91
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,pci.bus_id,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader | tee $D/gpu.txt
MAX_JOBS=16 python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 260 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider -rs tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 255 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 255 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; grep -E "passed|failed" $D/pytest_gpu.txt | tail -2; grep -E "^FAILED|^ERROR|^SKIPPED" $D/pytest_gpu.txt | head
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
(cd $OUT && tar czf c1.tgz c1)
SGL_FP8_GIT=$GIT timeout 110 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -36 $D/bench.txt
(cd $OUT && tar czf c1.tgz c1)
L=$((540 - SECONDS)); [ $L -gt 110 ] && L=110
if [ $L -gt 50 ]; then SGL_FP8_GIT=$GIT timeout $L python3 tools/regmma_probe.py --ms 1,2 --variants 8192 --out $D/probe > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"; grep -E "^us|^[0-9]+x|geometric" $D/probe.txt | tail -12; fi
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
