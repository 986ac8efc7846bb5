#!/usr/bin/env bash
# Session 37 call 6: kQuantFast (8 lanes a 128-group, the next pass's bf16 loads first; 24576 / 24579) beside kQuantize
# (8192 / 8195) and the GEMM on e4m3 input (0 / 3), 1-16 tokens.
set -u
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 400 python3 tools/regmma_probe.py --ms 1,2,4,8,16 --variants 0,3,8192,8195,24576,24579 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^us|^[0-9]+x|geometric" $D/probe.txt
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
