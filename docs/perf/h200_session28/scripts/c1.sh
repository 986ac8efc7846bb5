#!/usr/bin/env bash
# Session 28 call 1: where the wgmma ring kernel signals launch_dependents (flags 32768: after the
# prologue, 65536: after the MMAs; default: at entry), in the 4-warpgroup kernel and in the
# co-resident variant (512), back to back and after a copy kernel.
set -u
SECONDS=0
D=$OUT/c1; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
S=4096x2048,5120x4096,4608x4096,1536x4096,4096x1024,8192x1024
C="default;[0,0,0,0,512];[0,0,0,0,33280];[0,0,0,0,66048];[0,0,0,0,32768];[0,0,0,0,65536];default"
timeout 250 python3 tools/config_ab.py --shapes $S --ms 1,4,8,16 --configs "$C" --after none --out $D/ab_none > $D/ab_none.txt 2>&1
echo "ab none rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_none.txt | grep -v "^    \|kernels:" | tail -30
timeout $((560 - SECONDS)) python3 tools/config_ab.py --shapes $S --ms 1,4,8,16 --configs "$C" --after copy --out $D/ab_copy > $D/ab_copy.txt 2>&1
echo "ab copy rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_copy.txt | grep -v "^    \|kernels:" | tail -30
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
