#!/usr/bin/env bash
# Session 35 call 7: tools/regmma_probe.py after it took the library's PTX wrappers (its main variants re-measured), beside the fused op.
# (default plan and flag 6) on one H200, one run.
set -u
SECONDS=0
D=$OUT/c7; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 300 python3 tools/regmma_probe.py --variants 0,3,8,32,35,40 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -v "^building" $D/probe.txt | tail -40
