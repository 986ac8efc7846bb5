#!/usr/bin/env bash
# Session 30 call 4: tools/stream_ceiling.py --chain-mma at 0eeb3ad.
set -u
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm,clocks.sm,power.draw --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=0eeb3ad timeout 420 python3 tools/stream_ceiling.py --chain-mma --out $D/chain_mma > $D/chain_mma.txt 2>&1
echo "chain-mma rc=$? ${SECONDS}s"; grep -v "^\[" $D/chain_mma.txt | grep -v "^  N=" | tail -80
