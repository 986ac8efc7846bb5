#!/usr/bin/env bash
# Session 25 call 5: 4096x2048 (and 8192x1024 control) at 17-32 tokens: the default plan (device: K split 4, paired)
# against the split of 2 and the unpaired split of 4, both orders, no profiler.
set -u
cd "$(dirname "$0")/.."
SECONDS=0
D=$OUT/c5; mkdir -p $D
nvidia-smi --query-gpu=uuid,name --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
C="default;[2,0,0,0,0];[4,0,0,0,16384];default"
for after in none copy; do
  timeout 150 python3 tools/config_ab.py --after $after --shapes 4096x2048 --ms 17,20,24,28,32 --configs "$C" --out $D/ks_$after > $D/ks_$after.txt 2>&1
  echo "ks $after rc=$? ${SECONDS}s"; grep -v -i "warn" $D/ks_$after.txt | grep -v "^$" | tail -9
done
timeout 60 python3 .ab/plan_probe.py 4096x2048 17 20 24 28 32 17:2,0,0,0,0 32:2,0,0,0,0 > $D/plans.txt 2>&1; grep -v -i warn $D/plans.txt
cd $OUT && tar czf c5.tgz c5 && rm -rf c5
