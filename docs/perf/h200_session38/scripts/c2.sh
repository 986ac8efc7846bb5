#!/usr/bin/env bash
# Session 38 call 2: binary against binary, 59f0d1c (the kernels before the register-fed one) and NEW (the
# register-fed kernel the default at 1-2 tokens), 2 rounds of: the default config back to back (ab_none) and
# after a copy kernel (ab_copy) on the 7 SPEC §6 shapes at 1-2 tokens, and the decode step (e2e, batch 1, 2, 8).
# Then NEW's tests that changed (test_gpu.py's register-fed and refilled-ring tests).
set -u
SECONDS=0
export SGL_FP8_AB_SHAPES=5120x4096,4608x4096,4096x2048,8192x1024,4096x1024,1536x4096,2112x7168
export SGL_FP8_AB_MS=1,2 SGL_FP8_AB_SCALES=fp32,e8m0 SGL_FP8_AB_E2E_BATCHES=1,2,8
bash tools/binary_ab.sh 2 59f0d1c=.ab/59f0d1c.tar $NEW=.ab/$NEW.tar -- ab_none ab_copy e2e > $OUT/binary_ab.txt 2>&1
echo "binary_ab rc=$? ${SECONDS}s"; tail -80 $OUT/binary_ab.txt
(cd /tmp/binary_ab/$NEW && timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py -k "register_fed or refilled_ring or without_a_k_split or co_resident_variant_only" > $OUT/pytest_changed.txt 2>&1; echo "pytest rc=$? ${SECONDS}s"; tail -3 $OUT/pytest_changed.txt)
cd $OUT && tar czf c2.tgz binary_ab binary_ab.txt pytest_changed.txt
