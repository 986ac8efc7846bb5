#!/usr/bin/env bash
# Session 29 call 1: tools/stream_ceiling.py --chain: the weight stream with the activation loads and
# output stores every GEMM needs (no arithmetic), in every order, at M = 1-32, beside the fused op.
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown) timeout 400 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -v "^\[" $D/chain.txt | grep -v "^  N=" | tail -60
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
