#!/usr/bin/env bash
# Session 32 call 6: call 2's tool (4f1008b: 2 warpgroups, A within 16 KB, one group in flight) and call 5's
# (27fa412) on one H200, back to back, --chain-consume: does call 2's 0.81 at 5120x4096 M = 1 (0.75 in
# calls 3-5, other H200s) belong to the tool or to the GPU?
set -u
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=27fa412 timeout 150 python3 tools/stream_ceiling.py --chain-consume --out $D/new1 > $D/new1.txt 2>&1; echo "new rc=$? ${SECONDS}s"
mkdir -p /tmp/new && cp tools/stream_ceiling.cu tools/stream_ceiling.py /tmp/new/ && cp .s32/old/stream_ceiling.cu .s32/old/stream_ceiling.py tools/
SGL_FP8_GIT=4f1008b timeout 150 python3 tools/stream_ceiling.py --chain-consume --out $D/old > $D/old.txt 2>&1; echo "old rc=$? ${SECONDS}s"
cp /tmp/new/stream_ceiling.cu /tmp/new/stream_ceiling.py tools/
SGL_FP8_GIT=27fa412 timeout 150 python3 tools/stream_ceiling.py --chain-consume --out $D/new2 > $D/new2.txt 2>&1; echo "new again rc=$? ${SECONDS}s"
python3 .s32/summ.py $D/new1/stream_ceiling.json $D/old/stream_ceiling.json $D/new2/stream_ceiling.json | cut -c1-190
