#!/usr/bin/env bash
# Session 38 call 3: four builds, binary against binary: 59f0d1c (before the register-fed kernel), 74ccbb7 (its first
# library instance), 8bf097e (plain weights with compile-time offsets, 2 blocks in flight) and 88e981b (4 in flight);
# 2 rounds of the default config back to back (ab_none) and after a copy kernel (ab_copy) on the 7 SPEC §6 shapes at
# 1-2 tokens (fp32); then in 88e981b's tree the probe's kQuantize GEMM (variant 8192) beside the fused op, and the
# register-fed tests.
set -u
SECONDS=0
export SGL_FP8_AB_SHAPES=5120x4096,4608x4096,4096x2048,8192x1024,4096x1024,1536x4096,2112x7168
export SGL_FP8_AB_MS=1,2 SGL_FP8_AB_SCALES=fp32
bash tools/binary_ab.sh 2 59f0d1c=.ab/59f0d1c.tar 74ccbb7=.ab/74ccbb7.tar 8bf097e=.ab/8bf097e.tar 88e981b=.ab/88e981b.tar \
  -- ab_none ab_copy > $OUT/binary_ab.txt 2>&1
echo "binary_ab rc=$? ${SECONDS}s"; grep -v "^round" $OUT/binary_ab.txt | tail -40
cd /tmp/binary_ab/88e981b
SGL_FP8_GIT=88e981b timeout 120 python3 tools/regmma_probe.py --ms 1,2 --variants 0,8192 --out $OUT/probe > $OUT/probe.txt 2>&1
echo "probe rc=$? ${SECONDS}s"; grep -E "^us|^[0-9]+x|geometric|fused" $OUT/probe.txt | tail -20
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py -k "register_fed or refilled_ring or without_a_k_split or co_resident_variant_only or bit_exact or graph_replay" > $OUT/pytest_changed.txt 2>&1
echo "pytest rc=$? ${SECONDS}s"; tail -3 $OUT/pytest_changed.txt; grep -E "^FAILED|^E " $OUT/pytest_changed.txt | head
cd $OUT && tar czf c3.tgz binary_ab binary_ab.txt probe probe.txt pytest_changed.txt
