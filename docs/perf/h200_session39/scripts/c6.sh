#!/usr/bin/env bash
# Session 39 call 6: d8dfd3e (the register-fed kernel's fp16 activations converted by cvt.f32.f16): its GPU tests (the
# bit-exact quantization with bf16 and fp16 adversarial groups, the §3.4 contract, reproducibility), then the
# register-fed kernel forced against the default after a copy kernel and back to back at 1-2 tokens (bf16, fp32).
set -u
SECONDS=0
MAX_JOBS=16 python3 setup.py build_ext --inplace > $OUT/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
nvidia-smi --query-gpu=uuid,pci.bus_id --format=csv,noheader | tee $OUT/gpu_identity.txt
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py -k "register_fed or bit_exact" > $OUT/pytest_changed.txt 2>&1
echo "pytest rc=$? ${SECONDS}s"; tail -2 $OUT/pytest_changed.txt; grep -E "^FAILED|^E " $OUT/pytest_changed.txt | head
for after in copy none; do
  L=$((150 - SECONDS)); [ $L -lt 20 ] && break
  SGL_FP8_GIT=d8dfd3e timeout $L python3 tools/config_ab.py --configs "default;[0,0,0,0,32768]" --after $after --shapes 5120x4096,4608x4096,4096x2048,4096x1024,2112x7168 --ms 1,2 --scales fp32 --out $OUT/ab_$after > $OUT/ab_$after.txt 2>&1
  echo "ab $after rc=$? ${SECONDS}s"; grep -E "^ *[0-9]+ +[0-9]+ +fp32" $OUT/ab_$after.txt
done
cd $OUT && tar czf c6.tgz build.log gpu_identity.txt pytest_changed.txt ab_* && rm -rf ab_* build.log
