#!/usr/bin/env bash
# Session 25 call 6: the H200's cluster residency table; config_ab --kernels after the timings; bench.
set -u
cd "$(dirname "$0")/.."
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name --format=csv,noheader > $D/gpu.txt
nvcc -O3 -arch=sm_90a -Xptxas -v tools/cluster_residency.cu -o /tmp/cr > $D/cr_build.txt 2>&1 && /tmp/cr > $D/cluster_residency.txt 2>&1; echo "residency rc=$? ${SECONDS}s"
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 100 python3 tools/config_ab.py --shapes 4096x2048 --ms 17,32 --configs "default;[2,0,0,0,0]" --out $D/no_kernels > $D/no_kernels.txt 2>&1
echo "config_ab (no --kernels) rc=$? ${SECONDS}s"; grep -v -i warn $D/no_kernels.txt | grep -v "^$" | tail -5
timeout 100 python3 tools/config_ab.py --kernels --shapes 4096x2048 --ms 17,32 --configs "default;[2,0,0,0,0]" --out $D/kernels_after > $D/kernels_after.txt 2>&1
echo "config_ab rc=$? ${SECONDS}s"; grep -v -i warn $D/kernels_after.txt | grep -v "^$" | tail -12
timeout 200 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; tail -5 $D/bench.txt
cat $D/cluster_residency.txt | head -3; awk 'NR>2 && ($1>=80 && $1<=124)' $D/cluster_residency.txt
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
