#!/usr/bin/env bash
# Session 37 call 4: the register-fed probe with its entry weight loads kept above griddepcontrol.wait (every
# instance before had ptxas move them below it), beside the plain wait (4096 / 4099 / 4128 / 4131).
set -u
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 400 python3 tools/regmma_probe.py --variants 0,4096,3,4099,8,11,32,4128,35,4131,40,43,512,515,544,547,1536,1568,418 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^us|^[0-9]+x|geometric" $D/probe.txt
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
