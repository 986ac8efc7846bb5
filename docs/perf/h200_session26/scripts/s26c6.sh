#!/usr/bin/env bash
# Session 26 call 6: how many of a 4-slot CTA's copies at entry (config [0,0,early,0,0]), both orders.
set -u
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
C="default;[0,0,1,0,0];[0,0,3,0,0];[0,0,4,0,0];default"
for after in none copy; do
  timeout 150 python3 tools/config_ab.py --shapes 5120x4096,4608x4096 --ms 1,4,8 --configs "$C" --after $after --out $D/early_$after > $D/early_$after.txt 2>&1
  echo "early $after rc=$? ${SECONDS}s"; grep -v -i warn $D/early_$after.txt | grep -v "^$" | tail -12
done
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
