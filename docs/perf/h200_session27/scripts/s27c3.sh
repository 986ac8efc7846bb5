#!/usr/bin/env bash
# Session 27 call 3: the mma.sync ring kernel without a K split (config [1,0,0,0,256]: a row group an
# SM, 1-2 tiles a CTA, no cluster, no exchange) against the default plan on small shares, both orders.
set -u
SECONDS=0
D=$OUT/c3; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
C="default;[1,0,0,0,256];[0,0,0,0,256];[1,0,0,0,0];default"
for after in none copy; do
  timeout 200 python3 tools/config_ab.py --shapes 4096x2048,4096x1024,8192x1024 --ms 1,2,4,8 --configs "$C" --after $after --kernels --out $D/ab_$after > $D/ab_$after.txt 2>&1
  echo "ab $after rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_$after.txt | grep -v "^    \|kernels:" | tail -22
done
grep "^    " $D/ab_none.txt | sort | uniq | cut -c1-200 | head -30
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
