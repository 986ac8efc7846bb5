#!/usr/bin/env bash
# Session 37 call 3: is it the shared memory (L1 / shared split) or the CTAs an SM that reads variant 547's addresses at
# 0.86 in bare_rows_kernel (418) and 0.72 in the 8-row kernel? Both kernels with kSmemCap, 418 without its cap (422).
set -u
SECONDS=0
D=$OUT/c3; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 400 python3 tools/regmma_probe.py --variants 418,422,547,2595,548,2596,35,2083,32,2080,544,2592,0,2048,3,2051,512,2560,515,2563 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^us|^[0-9]+x|geometric" $D/probe.txt
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
