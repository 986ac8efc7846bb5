#!/usr/bin/env bash
# Session 36 call 7 at 7e823c8 (the landed kernels: 51889d6's SASS, f873346's plan; later commits docs only):
# the GPU suite, memcheck, racecheck (quick), bench; then on the same H200 the bare 8-row reads
# (regmma_probe 410-413, with 35) and stream_ceiling --ldg-residency, so the register-path stream
# and the read-only ldg kernels are compared on one machine.
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
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR|SKIPPED" $D/pytest_gpu.txt | head
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
SGL_FP8_GIT=$GIT timeout 100 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -34 $D/bench.txt
(cd $OUT && tar czf c7_verify.tar.gz c7)
SGL_FP8_GIT=$GIT timeout 90 python3 tools/regmma_probe.py --variants 35,410,411,412,413 --out $D/probe > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^[0-9]+x|geometric" $D/probe.txt | tail -20
L=$((560 - SECONDS)); [ $L -gt 120 ] && L=120
SGL_FP8_GIT=$GIT timeout $L python3 tools/stream_ceiling.py --ldg-residency --out $D/residency > $D/residency.txt 2>&1; echo "residency rc=$? ${SECONDS}s"
grep -E "^N=|^ldg|^bulk" $D/residency.txt | tail -60
(cd $OUT && tar czf c7_diag.tar.gz c7/probe c7/probe.txt c7/residency c7/residency.txt)
rm -rf $D
