#!/usr/bin/env bash
# Session 25 call 3 (kernels = 7734634's = 5570593's SASS): pairs on 4096x2048 / 2560x4096 with --kernels
# (session 24's unexplained pair_misc), and every copy at entry for 2-chunk shares.
set -u
cd "$(dirname "$0")/.."
SECONDS=0
D=$OUT/c3; mkdir -p $D
nvidia-smi --query-gpu=uuid,name --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
P="default;[0,0,0,0,8192];[2,0,0,0,8192];[4,0,0,0,8192];[4,0,0,0,0]"
for after in none copy; do
  timeout 150 python3 tools/config_ab.py --kernels --after $after --shapes 4096x2048,2560x4096 --ms 16,24,32 --configs "$P" --out $D/pairs_$after > $D/pairs_$after.txt 2>&1
  echo "pairs $after rc=$? ${SECONDS}s"; cat $D/pairs_$after.txt | grep -v "^$" | tail -14
done
E="default;[0,0,2,0,0]"
for after in none copy; do
  timeout 120 python3 tools/config_ab.py --after $after --shapes 4096x2048,8192x1024 --ms 1,8,16,32 --configs "$E" --out $D/early_$after > $D/early_$after.txt 2>&1
  echo "early $after rc=$? ${SECONDS}s"; cat $D/early_$after.txt | grep -v "^$" | tail -11
done
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
