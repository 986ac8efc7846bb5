#!/usr/bin/env bash
# Session 29 call 4: the 4-warpgroup kernel with every copy at entry (config field 3 = 8: all of
# the ring's slots) against its plan's half, on shapes whose ring has 2 slots (4096x2048 and
# others), 1-16 tokens, back to back and after a copy kernel; each config twice. The chain floor
# (calls 1-3) puts all at entry 0.27 us ahead on 4096x2048 without arithmetic; session 26 timed it
# in the kernel on the two large shapes only.
set -u
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
S=4096x2048,8192x2048,2048x2048,6144x2048,1536x4096
C="default;[0,0,8,0,0];default;[0,0,8,0,0]"
timeout 250 python3 tools/config_ab.py --shapes $S --ms 1,4,8,16 --configs "$C" --out $D/none > $D/none.txt 2>&1
echo "none rc=$? ${SECONDS}s"; cat $D/none.txt | tail -28
timeout $((570 - SECONDS)) python3 tools/config_ab.py --shapes $S --ms 1,4,8,16 --configs "$C" --after copy --out $D/copy > $D/copy.txt 2>&1
echo "copy rc=$? ${SECONDS}s"; cat $D/copy.txt | tail -28
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
