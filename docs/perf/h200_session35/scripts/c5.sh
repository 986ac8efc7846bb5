#!/usr/bin/env bash
# Session 35 call 5: tools/regmma_probe.py, the swapped orientation (8-row CTAs) beside the 16-row kernel and the fused op.
# (default plan and flag 6) on one H200, one run.
set -u
SECONDS=0
D=$OUT/c5; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 300 python3 tools/regmma_probe.py --variants 0,3,19,32,35,51 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -v "^building" $D/probe.txt | tail -40
