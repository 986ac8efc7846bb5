#!/usr/bin/env bash
# Session 26 call 1: verify 51889d6 (window-major 32-token CTAs): GPU suite, memcheck, racecheck, bench; wgmma_rate run_order.
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
(nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_rate tools/wgmma_rate.cu > $D/wgmma_rate_build.txt 2>&1) &
timeout 260 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 250 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 250 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
wait
timeout 40 /tmp/wgmma_rate > $D/wgmma_rate.txt 2>&1; echo "wgmma_rate rc=$? ${SECONDS}s"; head -8 $D/wgmma_rate.txt
SGL_FP8_GIT=51889d6 timeout $((585 - SECONDS)) python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -4 $D/bench.txt
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
