#!/usr/bin/env bash
# Session 29 call 7: tools/stream_ceiling.py --chain at a82d6a6, with 2000 / 4000 SM cycles of work after the
# last landing (thread 0 spins before the output) in two orders: all at entry, and half at entry with
# the rest once the activation loads are issued (the fused kernel's order).
set -u
SECONDS=0
D=$OUT/c7; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=a82d6a6 timeout 250 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -c WARNING $D/chain.txt
grep -E "^N=|^variant|^weight all at entry  |^weight all at entry, then|^half at entry, rest once the loads are issued  |^half at entry, rest once the loads are issued, then|^fused" $D/chain.txt
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
