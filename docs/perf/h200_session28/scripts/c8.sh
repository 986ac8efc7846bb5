#!/usr/bin/env bash
# Session 28 call 8: the tuned table's 4096x1024 e8m0 entry for 5-8 tokens ([0,0,0,0,0,2]: since
# session 27's rule the split-free plan with two-block copies, untimed) against the default, the
# split of 2 with two-block copies (what the entry ran when tuned) and no split, both orders.
set -u
SECONDS=0
D=$OUT/c8; mkdir -p $D
nvidia-smi --query-gpu=uuid,name --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
C="default;[0,0,0,0,0,2];[2,0,0,0,0,2];[1,0,0,0,0];default"
for o in copy none; do
timeout 120 python3 tools/config_ab.py --shapes 4096x1024 --ms 5,6,8 --scales e8m0,fp32 --configs "$C" --after $o --kernels --out $D/ab_$o > $D/ab_$o.txt 2>&1
echo "ab $o rc=$? ${SECONDS}s"; grep -v -i warn $D/ab_$o.txt | grep -v "^    \|kernels:" | tail -10
done
cd $OUT && tar czf c8.tgz c8 && rm -rf c8
