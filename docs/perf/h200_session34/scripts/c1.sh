#!/usr/bin/env bash
# Session 34 call 1 at the landed head (kernels 51889d6's SASS, plan f873346's): the GPU suite, memcheck,
# racecheck (quick) and bench, then tools/stream_ceiling.py --chain (the no-arithmetic chain beside the
# fused op and its diagnostic flags 1, 5, 7) on the same H200, so the closing note's table and the
# per-target evidence come from one machine and one build.
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
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
SGL_FP8_GIT=$GIT timeout 100 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -34 $D/bench.txt
L=$((560 - SECONDS)); [ $L -gt 200 ] && L=200
SGL_FP8_GIT=$GIT timeout $L python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1; echo "chain rc=$? ${SECONDS}s"
