#!/usr/bin/env bash
# Session 27 call 4: no K split (config [1,0,0,0,0]) against the default plan and the split of 2 on
# ten weights whose 4-tile CTAs hold a whole K row, 1-32 tokens, back to back and after a copy kernel:
# the data to fit what a cluster (any K split) costs the wgmma ring kernel's plan.
set -u
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
S=8192x1024,4096x1024,2048x1024,6144x1024,4096x1536,3072x1536,2048x2048,4096x2048,6144x1536,8192x2048
C="default;[1,0,0,0,0];[2,0,0,0,0];default"
timeout 280 python3 tools/config_ab.py --shapes $S --ms 1,4,8,16,32 --configs "$C" --after copy --out $D/ab_copy > $D/ab_copy.txt 2>&1
echo "ab copy rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_copy.txt | grep -v "^    \|kernels:\|bits" | tail -52
timeout $((570 - SECONDS)) python3 tools/config_ab.py --shapes $S --ms 1,4,8,16,32 --configs "$C" --after none --kernels --out $D/ab_none > $D/ab_none.txt 2>&1
echo "ab none rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_none.txt | grep -v "^    \|kernels:\|bits" | tail -52
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
