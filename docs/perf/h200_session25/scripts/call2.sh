#!/usr/bin/env bash
# Session 25 call 2: binary A/B of 7734634 (a) against an instance per window count (c), then the GPU tests of c.
set -u
cd "$(dirname "$0")/.."
SECONDS=0
mkdir -p $OUT/c2
export SGL_FP8_AB_SHAPES=4096x2048,4096x1024,8192x1024,1024x4096 SGL_FP8_AB_MS=1,8,16,24,32 SGL_FP8_AB_E2E_BATCHES=8,32
OUT=$OUT/c2 timeout 400 bash tools/binary_ab.sh 2 a=.ab/a.tar c=.ab/c.tar -- ab_none ab_copy e2e > $OUT/c2/ab_log.txt 2>&1
echo "ab rc=$? ${SECONDS}s"; tail -52 $OUT/c2/ab_log.txt
cd /tmp/binary_ab/c && PYTHONPATH=$PWD timeout 170 python3 -m pytest -q -p no:cacheprovider -m gpu -n 4 -x tests > $OUT/c2/pytest_gpu_c.txt 2>&1; echo "pytest rc=$? ${SECONDS}s: $(tail -1 $OUT/c2/pytest_gpu_c.txt)"
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
