#!/usr/bin/env bash
# Session 34 call 2: the co-resident variant (flag 512) against the default at the bench shapes, 1-16 tokens,
# back to back (bench's order) and after a copy kernel (a decode step's order), with bench in the same call
# for the cuBLASLt peer: at which points of issue 3's third target (2.5x quant + cuBLASLt) would a kernel we
# have meet it in bench's order, and what would it cost in a decode step's?
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 100 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"
rm -f $D/bench_gpu.png
S=5120x4096,4608x4096,4096x2048
C="default;[0,0,0,0,512];default"
timeout 200 python3 tools/config_ab.py --shapes $S --ms 1,4,8,16 --scales fp32 --configs "$C" --after none --kernels --out $D/ab_none > $D/ab_none.txt 2>&1
echo "ab none rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_none.txt | grep -v "^    \|kernels:" | tail -16
timeout $((560 - SECONDS)) python3 tools/config_ab.py --shapes $S --ms 1,4,8,16 --scales fp32 --configs "$C" --after copy --out $D/ab_copy > $D/ab_copy.txt 2>&1
echo "ab copy rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_copy.txt | grep -v "^    \|kernels:" | tail -16
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
