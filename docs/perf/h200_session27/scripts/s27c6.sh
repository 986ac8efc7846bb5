#!/usr/bin/env bash
# Session 27 call 6: f873346 (the split-free rule from 0.3 of the SMs): its GPU test, the GPU suite,
# config_ab of the newly moved 2560x1024 / 3072x1024 / 3584x1024 against the split of 2, both orders; bench.
set -u
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
S=2560x1024,3072x1024,3584x1024,2048x1024
C="default;[2,0,0,0,0];[1,0,0,0,0];default"
timeout 60 python3 tools/config_ab.py --shapes $S --ms 1,4,8 --configs "$C" --after copy --out $D/ab_copy > $D/ab_copy.txt 2>&1
echo "ab copy rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_copy.txt | grep -v "^    \|kernels:\|bits" | tail -14
timeout 80 python3 tools/config_ab.py --shapes $S --ms 1,4,8 --configs "$C" --after none --kernels --out $D/ab_none > $D/ab_none.txt 2>&1
echo "ab none rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_none.txt | grep -v "^    \|kernels:\|bits" | tail -14
SGL_FP8_GIT=f873346 timeout 100 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -4 $D/bench.txt
timeout 240 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1; echo "pytest rc=$? ${SECONDS}s"; tail -2 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
