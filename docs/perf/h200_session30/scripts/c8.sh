#!/usr/bin/env bash
# Session 30 call 8 at 9f280a1: --chain-mma with 8, 16 or 32 wgmma a warpgroup at entry (does the SM
# clock follow the tensor work?), then the GPU suite (the package, kernels and GPU tests are 112158d's).
set -u
SECONDS=0
D=$OUT/c8; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=9f280a1 timeout 200 python3 tools/stream_ceiling.py --chain-mma --out $D/chain_mma > $D/chain_mma.txt 2>&1
echo "chain-mma rc=$? ${SECONDS}s"; grep -c MISMATCH $D/chain_mma.txt
timeout 330 python3 -m pytest -m gpu -n 4 -q -p no:cacheprovider tests > $D/pytest_gpu.txt 2>&1
echo "pytest rc=$? ${SECONDS}s"; tail -3 $D/pytest_gpu.txt; grep -E "^FAILED|^ERROR" $D/pytest_gpu.txt | head
