#!/usr/bin/env bash
# Session 36 call 1: sm90.md Next steps item 17. regmma_probe load patterns (fragment, whole rows,
# 4 rows x 128 B) for both kernels and variant 72 (GEMM on 4x128 loads via smem transpose), beside
# the fused op and flag 6; then stream_ceiling --quick (the read-only ldg/bulk kernels) on the same GPU.
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 300 python3 tools/regmma_probe.py --variants 0,3,67,71,72,35,99,103 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 150 python3 tools/stream_ceiling.py --quick --out $D/quick > $D/quick.txt 2>&1; echo "quick rc=$? ${SECONDS}s"
grep -v "^building" $D/probe.txt | tail -60
tail -25 $D/quick.txt
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
