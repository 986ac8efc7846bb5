#!/usr/bin/env bash
# Session 25 call 1: build the working tree (window-major), GPU tests, then binary A/B against 7734634.
set -u
cd "$(dirname "$0")/.."
SECONDS=0
mkdir -p $OUT/c1
nvidia-smi --query-gpu=uuid,name --format=csv,noheader > $OUT/c1/gpu.txt
python3 setup.py build_ext --inplace > $OUT/c1/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 180 python3 -m pytest -q -p no:cacheprovider -m gpu -n 4 -x tests > $OUT/c1/pytest_gpu.txt 2>&1; echo "pytest rc=$? ${SECONDS}s: $(tail -1 $OUT/c1/pytest_gpu.txt)"
timeout 90 python3 tools/wgmma_probe.py --ms 1,8,12,16,24,32 > $OUT/c1/wgmma_probe.txt 2>&1; echo "probe rc=$? $(tail -2 $OUT/c1/wgmma_probe.txt)"
export SGL_FP8_AB_SHAPES=5120x4096,4608x4096,4096x4096,4096x2048 SGL_FP8_AB_MS=8,16,24,32
OUT=$OUT/c1 timeout 270 bash tools/binary_ab.sh 2 a=.ab/a.tar b=.ab/b.tar -- ab_none ab_copy > $OUT/c1/ab_log.txt 2>&1
echo "ab rc=$? ${SECONDS}s"; tail -60 $OUT/c1/ab_log.txt
cd $OUT && tar czf c1.tgz c1 && rm -rf c1
