#!/usr/bin/env bash
# Session 27 call 8 (data for a later session): K blocks per weight copy (config field 6: 2 or 4)
# against the plan's (~32 KB boxes) at 8-32 tokens on nine shapes, both orders. The tuned table takes
# two-block copies on 4096x1024 and 1536x4096 at 16-32 tokens (1.04-1.08x over the plan).
set -u
SECONDS=0
D=$OUT/c8; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
S=4096x1024,8192x1024,1536x4096,2112x7168,5120x4096,4608x4096,4096x2048,2048x2048,3072x1536
C="default;[0,0,0,0,0,2];[0,0,0,0,0,4];default"
for after in copy none; do
  timeout 120 python3 tools/config_ab.py --shapes $S --ms 8,16,32 --configs "$C" --after $after --out $D/ab_$after > $D/ab_$after.txt 2>&1
  echo "ab $after rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_$after.txt | grep -v "^    \|kernels:\|bits" | tail -29
done
cd $OUT && tar czf c8.tgz c8 && rm -rf c8
