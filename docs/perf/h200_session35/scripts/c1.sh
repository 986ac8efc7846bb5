#!/usr/bin/env bash
# Session 35 call 1 at the landed kernels (51889d6's SASS, f873346's plan): the GPU suite, memcheck,
# racecheck (quick), bench, then on the same H200 and build tools/stream_ceiling.py --chain (the
# no-arithmetic chain) and --chain-timed (the fused kernel's stream + MMAs alone, flag 6, beside the
# read-once consumer), so each target's allowance and the measured bounds come from one run.
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
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR|SKIPPED" $D/pytest_gpu.txt | head
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
SGL_FP8_GIT=$GIT timeout 100 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -34 $D/bench.txt
(cd $OUT && tar czf c1_verify.tar.gz c1)
L=$((330 - SECONDS)); [ $L -gt 90 ] && L=90
SGL_FP8_GIT=$GIT timeout $L python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1; echo "chain rc=$? ${SECONDS}s"
(cd $OUT && tar czf c1_chain.tar.gz c1/chain c1/chain.txt)
L=$((575 - SECONDS)); [ $L -gt 220 ] && L=220
SGL_FP8_GIT=$GIT timeout $L python3 tools/stream_ceiling.py --chain-timed --out $D/timed > $D/timed.txt 2>&1; echo "timed rc=$? ${SECONDS}s"
(cd $OUT && tar czf c1_timed.tar.gz c1/timed c1/timed.txt)
rm -rf $D
