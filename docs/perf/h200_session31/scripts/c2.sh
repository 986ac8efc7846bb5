#!/usr/bin/env bash
# Session 31 call 2 at 5f4a19f (the landed kernels): how close does this kernel come to the floor when
# the activations cost nothing? tools/config_ab.py --diagnostic at the 15 fp32 bench points, back to
# back: every copy at entry (config field 3 = 64: all) without the prologue (flag 2: no activations
# read, the MMAs wait for their boxes only), the plan's order without it, every copy at entry with
# neither prologue nor epilogue (6), the copies alone at entry (7), and the whole kernel with every
# copy at entry; the default first and last. Floors from the copy rate measured in the same call.
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
python3 .s31/floors.py $D/floors.json; echo "floors rc=$? ${SECONDS}s"
C="default;[0,0,64,0,2];[0,0,0,0,2];[0,0,64,0,6];[0,0,64,0,7];[0,0,64,0,0];default"
SGL_FP8_GIT=5f4a19f timeout 420 python3 tools/config_ab.py --diagnostic --shapes 5120x4096,4608x4096,4096x2048 --ms 1,4,8,16,32 --configs "$C" --out $D/none > $D/none.txt 2>&1
echo "config_ab rc=$? ${SECONDS}s"; tail -28 $D/none.txt
python3 .s31/floors.py $D/floors_after.json; echo "floors after rc=$? ${SECONDS}s"
