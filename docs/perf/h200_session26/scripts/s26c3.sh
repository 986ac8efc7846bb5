#!/usr/bin/env bash
# Session 26 call 3: smem_contention (+ landing order); gemm_timeline at the landed kernels.
set -u
SECONDS=0
D=$OUT/c3; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
(python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s" > $D/build_rc.txt) &
nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/smem_contention tools/smem_contention.cu > $D/sc_build.txt 2>&1
timeout 120 /tmp/smem_contention > $D/smem_contention.txt 2>&1; echo "smem_contention rc=$? ${SECONDS}s"; cat $D/smem_contention.txt
wait; cat $D/build_rc.txt
timeout 200 python3 tools/gemm_timeline.py --out $D/timeline --cases 5120x4096:1,8 --variants default,stream_alone > $D/timeline.txt 2>&1; echo "timeline rc=$? ${SECONDS}s"; tail -40 $D/timeline.txt
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
