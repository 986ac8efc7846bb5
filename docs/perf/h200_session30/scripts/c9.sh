#!/usr/bin/env bash
# Session 30 call 9 at 82e5ff9: --chain-mma after the bursts' operand fix (8, 16 and 32 wgmma a warpgroup at entry).
set -u
SECONDS=0
D=$OUT/c9; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=82e5ff9 timeout 250 python3 tools/stream_ceiling.py --chain-mma --out $D/chain_mma > $D/chain_mma.txt 2>&1
echo "chain-mma rc=$? ${SECONDS}s"; grep -c MISMATCH $D/chain_mma.txt
