#!/usr/bin/env bash
# Session 28 call 4: flag 32768 = each warpgroup issues one block of MMAs on a ring slot not yet
# written before griddepcontrol.wait (a tensor pipe warmed up off the critical path), against the
# default, twice each, back to back and after a copy kernel.
set -u
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
S=5120x4096,4608x4096,4096x2048,8192x1024,1536x4096
C="default;[0,0,0,0,32768];default;[0,0,0,0,32768]"
timeout 200 python3 tools/config_ab.py --shapes $S --ms 1,4,8,16 --configs "$C" --after none --out $D/ab_none > $D/ab_none.txt 2>&1
echo "ab none rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_none.txt | grep -v "^    \|kernels:" | tail -24
timeout $((560 - SECONDS)) python3 tools/config_ab.py --shapes $S --ms 1,4,8,16 --configs "$C" --after copy --out $D/ab_copy > $D/ab_copy.txt 2>&1
echo "ab copy rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_copy.txt | grep -v "^    \|kernels:" | tail -24
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
