#!/usr/bin/env bash
# Session 29 call 9: the landed head (1db57e8; the package and kernels as 112158d): the GPU suite.
set -u
SECONDS=0
D=$OUT/c9; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 300 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1
echo "pytest rc=$? ${SECONDS}s"; tail -3 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head
cd $OUT && tar czf c9.tgz c9 && rm -rf c9
