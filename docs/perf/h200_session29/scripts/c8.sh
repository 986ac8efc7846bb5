#!/usr/bin/env bash
# Session 29 call 8: tools/stream_ceiling.py --chain at d834046, with 2000 / 4000 SM cycles of work after the
# last landing in small CTAs (4096x2048's shares leave room for another CTA on the SM), beside the
# same work with one CTA an SM (call 7's variants, again).
set -u
SECONDS=0
D=$OUT/c8; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=d834046 timeout 250 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -c WARNING $D/chain.txt
grep -E "^N=|^variant|^weight all at entry  |^weight all at entry, then|^weight all at entry, small CTAs|^half at entry, rest once the loads are issued  |^half at entry, rest once the loads are issued, then|^fused default" $D/chain.txt
cd $OUT && tar czf c8.tgz c8 && rm -rf c8
