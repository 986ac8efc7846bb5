#!/usr/bin/env bash
# Session 28 call 6: where the two-CTAs-an-SM build (042b074) places its CTAs: per-CTA timelines
# (%smid) of the default on 4096x1024, 8192x1024, 1536x4096 and 4096x2048 at 1 token, back to back.
set -u
SECONDS=0
D=$OUT/c6; mkdir -p $D
nvidia-smi --query-gpu=uuid,name --format=csv,noheader > $D/gpu.txt
mkdir -p /tmp/b && tar -xf .ab/042b074.tar -C /tmp/b && cd /tmp/b
MAX_JOBS=16 python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 200 python3 tools/gemm_timeline.py --out $D/none --cases "4096x1024:1;8192x1024:1;1536x4096:1;4096x2048:1" --variants default > $D/none.txt 2>&1
echo "timeline rc=$? ${SECONDS}s"; grep -v -i warn $D/none.txt | tail -12
cd $OUT && tar czf c6.tgz c6 && rm -rf c6
