#!/usr/bin/env bash
# Session 36 call 6: the 8-row CTAs' share read bare, by 128 or 256 threads, linearly or in the GEMM's strips
# (regmma_probe variants 410-413), beside the 8-row loads-only diagnostics (35, 401) and the fused op.
set -u
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 240 python3 tools/regmma_probe.py --variants 35,401,410,411,412,413 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^[0-9]+x|geometric|WARN|rror" $D/probe.txt | tail -24
grep -E "N=5120 K=4096 M=1 " $D/probe.txt
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
