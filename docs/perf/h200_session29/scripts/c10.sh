#!/usr/bin/env bash
# Session 29 call 10: the tool after the final review (1f6844a: one check_then_time for every mode):
# --quick (run()) and --chain, to see both paths run and every checksum hold.
set -u
SECONDS=0
D=$OUT/c10; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=1f6844a timeout 120 python3 tools/stream_ceiling.py --quick --out $D/quick > $D/quick.txt 2>&1
echo "quick rc=$? ${SECONDS}s"; grep -c -E "WARNING|MISMATCH" $D/quick.txt; grep -c " ok$" $D/quick.txt
SGL_FP8_GIT=1f6844a timeout 250 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -c -E "WARNING|MISMATCH" $D/chain.txt; grep -A 30 "^geometric" $D/chain.txt
cd $OUT && tar czf c10.tgz c10 && rm -rf c10
