#!/usr/bin/env bash
# Session 25 call 4: the default plan of 4096x2048 at 24-32 tokens, in fresh processes after different calls.
set -u
cd "$(dirname "$0")/.."
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
run() { echo "== $*"; timeout 60 python3 .ab/plan_probe.py "$@" 2>&1 | grep -v -i "warn"; }
{
run 4096x2048 24 32
run 4096x2048 16 24
run 4096x2048 16:4,0,0,0,8192 24
run 4096x2048 16:2,0,0,0,8192 24
run 4096x2048 1 8 16 32
run 4096x2048 prof:24 32
run 4096x2048 24:4,0,0,0,8192 24 32
run 4096x2048 24:2,0,0,0,8192 24 32
run 4096x2048 24:0,0,0,0,8192 24
} > $D/plan_probe.txt 2>&1
cat $D/plan_probe.txt; echo "${SECONDS}s"
cd $OUT && tar czf c4.tgz c4 && rm -rf c4
