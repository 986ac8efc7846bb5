#!/usr/bin/env bash
# Session 28 call 5: binary against binary: 96d32ea (landed) against 042b074 (tag
# exp/s28-two-ctas-an-sm: the 1-8-token 4-warpgroup instance compiled for two CTAs an SM, 64
# registers), back to back and after a copy kernel, two rounds.
set -u
SECONDS=0
nvidia-smi --query-gpu=uuid,name --format=csv,noheader
export SGL_FP8_AB_SHAPES=4096x2048,5120x4096,4608x4096,8192x1024,4096x1024,1536x4096 SGL_FP8_AB_MS=1,4,8
export MAX_JOBS=8
bash tools/binary_ab.sh 2 96d32ea=.ab/96d32ea.tar 042b074=.ab/042b074.tar -- ab_none ab_copy 2>&1 | tail -60
cd $OUT && tar czf c5.tgz binary_ab && rm -rf binary_ab
