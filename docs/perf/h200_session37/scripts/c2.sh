#!/usr/bin/env bash
# Session 37 call 2: why the rotated 8-row GEMM's loads (547, 0.76) stay slow where the staggered bare strips (415)
# read at 0.89: the same addresses bare (418), rotations within rows by 128 / 512 B, the GEMM's loads bare / at
# entry, and GEMMs rotated by 4 K blocks a CTA (the 512 B stagger).
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 400 python3 tools/regmma_probe.py --variants 411,415,416,417,418,419,420,421,32,35,544,547,548,555,556,1568,1571,1572,0,3,512,1536,1539 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^us|^[0-9]+x|geometric" $D/probe.txt
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
