#!/usr/bin/env bash
# Session 25 call 7: window-major at 32 tokens only (d) against 7734634 (a), 24-32 tokens and the decode step.
set -u
cd "$(dirname "$0")/.."
SECONDS=0
mkdir -p $OUT/c7
export SGL_FP8_AB_SHAPES=4096x2048,2560x4096,5120x4096 SGL_FP8_AB_MS=24,32 SGL_FP8_AB_E2E_BATCHES=32
OUT=$OUT/c7 timeout 240 bash tools/binary_ab.sh 2 a=.ab/a.tar d=.ab/d.tar -- ab_none ab_copy e2e > $OUT/c7/ab_log.txt 2>&1
echo "ab rc=$? ${SECONDS}s"; tail -30 $OUT/c7/ab_log.txt
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
