#!/usr/bin/env bash
# Session 37 call 1: sm90.md Next steps item 19. The rotated-K register-fed GEMMs (512/544) and their loads
# (515/547) beside unrotated 0/3/32/35; bare reads 412 (linear) 414 (linear staggered 512 B) 415 (strips
# staggered) 416 (linear rotated 128 B within 4 KB); then stream_ceiling --plan-copies (rotated box order).
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 330 python3 tools/regmma_probe.py --variants 0,3,512,515,32,35,544,547,412,414,415,416 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 150 python3 tools/stream_ceiling.py --plan-copies --out $D/plan > $D/plan.txt 2>&1; echo "plan rc=$? ${SECONDS}s"
grep -v "^building" $D/probe.txt | tail -70
tail -30 $D/plan.txt
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
