#!/usr/bin/env bash
# Session 26 call 7: next step 6 - 2048x2048 at 9-16 tokens: the default (split of 2) against the paired and unpaired split of 4; 2560x4096 at 8 tokens' plan recorded.
set -u
SECONDS=0
D=$OUT/c7; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
C="default;[4,0,0,0,8192];[4,0,0,0,0];[2,0,0,0,8192];default"
for after in none copy; do
  timeout 150 python3 tools/config_ab.py --kernels --shapes 2048x2048 --ms 9,12,16 --configs "$C" --after $after --out $D/s2048_$after > $D/s2048_$after.txt 2>&1
  echo "2048 $after rc=$? ${SECONDS}s"; grep -v -i warn $D/s2048_$after.txt | grep -v "^$" | tail -22
done
timeout 100 python3 tools/config_ab.py --kernels --shapes 2560x4096 --ms 8 --configs "default;[4,0,0,0,0];[2,0,0,0,0]" --after copy --out $D/s2560_copy > $D/s2560_copy.txt 2>&1
echo "2560 rc=$? ${SECONDS}s"; grep -v -i warn $D/s2560_copy.txt | grep -v "^$" | tail -10
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
