#!/usr/bin/env bash
# Session 39 call 2: item 23 with dd6063c's register-fed kernel (block scales at entry): re-tune the table's M = 1-2
# buckets of the 7 SPEC §6 shapes, fp32 and e8m0, after a copy kernel (tune's candidates include flag 32768), into a
# copy of the shipped table (its other entries kept); then the changed GPU tests with that table.
set -u
SECONDS=0
GIT=${GIT:?}
MAX_JOBS=16 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
nvidia-smi --query-gpu=uuid,pci.bus_id,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader | tee $OUT/gpu_identity.txt
mkdir -p $OUT/tune && cp sglang_fp8ext/configs/nvidia_h200.json $OUT/tune/
SGL_FP8_GIT=$GIT timeout 420 python3 -m sglang_fp8ext tune --ms 1,2 --out $OUT/tune > $OUT/tune/tune.txt 2> $OUT/tune/tune.err
echo "tune rc=$? ${SECONDS}s"; grep -v "^$" $OUT/tune/tune.txt | tail -34
if [ -s $OUT/tune/nvidia_h200.json ] && [ $SECONDS -lt 520 ]; then
  cp $OUT/tune/nvidia_h200.json sglang_fp8ext/configs/nvidia_h200.json
  timeout $((585 - SECONDS)) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_dispatch.py tests/test_linear.py > $OUT/pytest_dispatch_linear.txt 2>&1
  echo "pytest rc=$? ${SECONDS}s"; tail -2 $OUT/pytest_dispatch_linear.txt
fi
cd $OUT && tar czf c2.tgz tune build.log gpu_identity.txt $(ls pytest_dispatch_linear.txt 2>/dev/null) && rm -rf tune build.log
