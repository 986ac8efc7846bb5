#!/usr/bin/env bash
# Session 30 call 10 at 6ec0242: the reviewed tool on an H200: --chain-mma and --chain (every checksum checked).
set -u
SECONDS=0
D=$OUT/c10; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=6ec0242 timeout 200 python3 tools/stream_ceiling.py --chain-mma --out $D/chain_mma > $D/chain_mma.txt 2>&1
echo "chain-mma rc=$? ${SECONDS}s"; grep -c MISMATCH $D/chain_mma.txt; grep -c "fold_ok\": false" $D/chain_mma/stream_ceiling.json
SGL_FP8_GIT=6ec0242 timeout 250 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -c MISMATCH $D/chain.txt; grep -A32 "geometric mean" $D/chain.txt | grep -i "fused default\|K/8\|weight all at entry  "
