#!/usr/bin/env bash
# Session 30 call 6 at 0eeb3ad (main's kernels): every copy at entry (config field 3 = 8) against the plan's
# half, with the whole kernel, without its prologue (flag 2: the MMAs wait for their boxes only, not for
# the activations) and without its MMAs (flag 1), back to back. Does the activations' round trip under
# the weight stream decide the copy order? (The chain: with no activations to wait for, all at entry
# lands the share 1.2 us sooner.)
set -u
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
C="default;[0,0,8,0,0];[0,0,0,0,2];[0,0,8,0,2];[0,0,0,0,1];[0,0,8,0,1];default;[0,0,8,0,0]"
SGL_FP8_GIT=0eeb3ad timeout 400 python3 tools/config_ab.py --diagnostic --shapes 5120x4096,4608x4096,4096x2048 --ms 1,4,8 --configs "$C" --out $D/none > $D/none.txt 2>&1
echo "none rc=$? ${SECONDS}s"; cat $D/none.txt | tail -24
