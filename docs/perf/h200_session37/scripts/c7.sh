#!/usr/bin/env bash
# Session 37 call 7: kQuantCluster (clusters of 8 CTAs share the quantization over DSMEM; 40960 / 40963) beside
# kQuantize (8192) and the GEMM on e4m3 input (0 / 3), 1-16 tokens.
set -u
SECONDS=0
D=$OUT/c7; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 400 python3 tools/regmma_probe.py --ms 1,2,4,8,16 --variants 0,3,8192,40960,40963 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^us|^[0-9]+x|geometric" $D/probe.txt
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
