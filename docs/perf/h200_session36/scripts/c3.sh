#!/usr/bin/env bash
# Session 36 call 3: why the read-only ldg kernels stream faster than the register-fed probe's loads.
# (1) regmma_probe: the 8-row and 16-row kernels (GEMM and loads alone) as they are and under launch bounds
#     that leave room on each SM for the next launch's CTAs (kHeadroom), beside the fused op and flag 6;
# (2) stream_ceiling --ldg-residency: the ldg kernels as they are and capped at their grid's CTAs an SM.
set -u
SECONDS=0
D=$OUT/c3; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 240 python3 tools/regmma_probe.py --variants 3,259,32,288,35,291,99,323 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 200 python3 tools/stream_ceiling.py --ldg-residency --out $D/residency > $D/residency.txt 2>&1; echo "residency rc=$? ${SECONDS}s"
grep -E "registers|^[0-9]+x|geometric|WARN|rror" $D/probe.txt | grep -v "^N=" | tail -30
grep -E "^N=|^ldg|^bulk|WARN|note|rror" $D/residency.txt | tail -40
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
