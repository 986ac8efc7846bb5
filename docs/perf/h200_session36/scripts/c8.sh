#!/usr/bin/env bash
# Session 36 call 8 (the last ~250 s of device time): bare 8-row reads, linear vs linear staggered by 512 B a
# CTA vs strips, 1 token only, no fused rows.
set -u
SECONDS=0
D=$OUT/c8; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 60 python3 tools/regmma_probe.py --no-fused --ms 1 --variants 412,414,413 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^N=|^[0-9]+x|geometric" $D/probe.txt | tail -12
cd $OUT && tar czf c8.tgz c8 && rm -rf c8
