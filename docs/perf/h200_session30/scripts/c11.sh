#!/usr/bin/env bash
# Session 30 call 11 at ba56233: the tool after the review's refactor (ChainRig): --chain-mma and --chain.
set -u
SECONDS=0
D=$OUT/c11; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=ba56233 timeout 180 python3 tools/stream_ceiling.py --chain-mma --out $D/chain_mma > $D/chain_mma.txt 2>&1
echo "chain-mma rc=$? ${SECONDS}s"; grep -c MISMATCH $D/chain_mma.txt; grep -c '"fold_ok": false' $D/chain_mma/stream_ceiling.json; tail -3 $D/chain_mma.txt
SGL_FP8_GIT=ba56233 timeout 200 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -c MISMATCH $D/chain.txt; grep -c '"fold_ok": false' $D/chain/stream_ceiling.json; grep -A32 "geometric mean" $D/chain.txt | grep -i "fused default\|K/8 a CTA  "
