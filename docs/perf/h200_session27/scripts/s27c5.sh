#!/usr/bin/env bash
# Session 27 call 5: b99981a (no K split by default up to 8 tokens on K <= 1024 shapes whose 4-tile
# CTAs cover >= 0.45 of the SMs): the GPU suite, memcheck, racecheck; config_ab of the moved plans
# (and unmeasured K < 1024, 5120x1024, 3072x1024 as a control) against the split of 2, both orders;
# bench (no SPEC Qwen plan moves).
set -u
SECONDS=0
D=$OUT/c5; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "without_a_k_split or co_resident_variant_only" > $D/pytest_rule.txt 2>&1; echo "rule tests rc=$? ${SECONDS}s"; tail -3 $D/pytest_rule.txt
timeout 240 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1 &
P1=$!
(PYTHONPATH=. timeout 235 compute-sanitizer --tool memcheck python3 tools/sanitize_smoke.py > $D/memcheck.txt 2>&1; echo "memcheck rc=$?" >> $D/memcheck.txt) &
P2=$!
(PYTHONPATH=. timeout 235 compute-sanitizer --tool racecheck --racecheck-report hazard python3 tools/sanitize_smoke.py --quick > $D/racecheck.txt 2>&1; echo "racecheck rc=$?" >> $D/racecheck.txt) &
P3=$!
wait $P1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head
wait $P2 $P3; echo "sanitizers ${SECONDS}s"; tail -2 $D/memcheck.txt; tail -2 $D/racecheck.txt
S=8192x1024,6144x1024,5120x1024,4096x1024,3072x1024,8192x512,4096x512,6144x768
C="default;[2,0,0,0,0];[1,0,0,0,0];default"
timeout 90 python3 tools/config_ab.py --shapes $S --ms 1,2,4,8 --configs "$C" --after copy --out $D/ab_copy > $D/ab_copy.txt 2>&1
echo "ab copy rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_copy.txt | grep -v "^    \|kernels:\|bits" | tail -34
timeout 120 python3 tools/config_ab.py --shapes $S --ms 1,2,4,8 --configs "$C" --after none --kernels --out $D/ab_none > $D/ab_none.txt 2>&1
echo "ab none rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_none.txt | grep -v "^    \|kernels:\|bits" | tail -34
SGL_FP8_GIT=b99981a timeout $((590 - SECONDS)) python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -4 $D/bench.txt
cd $OUT && tar czf c5.tgz c5 && rm -rf c5
