#!/usr/bin/env bash
# Session 28 call 2: the co-resident variant (flag 512) with fewer of its copies at entry
# (config field 3 = tensor copies requested before the activations are read; the plan's is all
# of them), against the default, back to back and after a copy kernel.
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
S=4096x2048,1536x4096,4096x1024,8192x1024
C="default;[0,0,0,0,512];[0,0,1,0,512];[0,0,2,0,512];[0,0,3,0,512];default"
timeout 200 python3 tools/config_ab.py --shapes $S --ms 1,2,4,8 --configs "$C" --after none --kernels --out $D/ab_none > $D/ab_none.txt 2>&1
echo "ab none rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_none.txt | grep -v "^    \|kernels:" | tail -24
timeout $((560 - SECONDS)) python3 tools/config_ab.py --shapes $S --ms 1,2,4,8 --configs "$C" --after copy --out $D/ab_copy > $D/ab_copy.txt 2>&1
echo "ab copy rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_copy.txt | grep -v "^    \|kernels:" | tail -24
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
