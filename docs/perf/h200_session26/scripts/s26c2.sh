#!/usr/bin/env bash
# Session 26 call 2: smem_contention probe; bench --diagnose at 51889d6 (the landed kernels).
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
(python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s" > $D/build_rc.txt) &
nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/smem_contention tools/smem_contention.cu > $D/sc_build.txt 2>&1
timeout 120 /tmp/smem_contention > $D/smem_contention.txt 2>&1; echo "smem_contention rc=$? ${SECONDS}s"; cat $D/smem_contention.txt
wait; cat $D/build_rc.txt
SGL_FP8_GIT=51889d6 timeout $((560 - SECONDS)) python3 -m sglang_fp8ext bench --diagnose --out $D > $D/diagnose.txt 2>&1; echo "diagnose rc=$? ${SECONDS}s"; tail -3 $D/diagnose.txt
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
