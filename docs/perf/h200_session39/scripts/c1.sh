#!/usr/bin/env bash
# Session 39 call 1: does loading the register-fed kernel's block scales at entry (dd6063c) close the gap to its
# probe? Binary against binary, caa8991 (session 38's head) and dd6063c (5131313's kernel), 2 rounds of the default config and the
# register-fed kernel forced (flag 32768), back to back and after a copy kernel, on the 7 SPEC §6 shapes at 1-2
# tokens (fp32); then in dd6063c's tree the probe's kQuantize GEMM (variant 8192) beside the fused op, and the
# register-fed GPU tests (fp32 and e8m0 scales).
set -u
SECONDS=0
export SGL_FP8_AB_SHAPES=5120x4096,4608x4096,4096x2048,8192x1024,4096x1024,1536x4096,2112x7168
export SGL_FP8_AB_MS=1,2 SGL_FP8_AB_SCALES=fp32 SGL_FP8_AB_CONFIGS="default;[0,0,0,0,32768]"
bash tools/binary_ab.sh 2 caa8991=.ab/caa8991.tar dd6063c=.ab/dd6063c.tar -- ab_none ab_copy > $OUT/binary_ab.txt 2>&1
echo "binary_ab rc=$? ${SECONDS}s"; grep -v "^round" $OUT/binary_ab.txt | tail -64
cd /tmp/binary_ab/dd6063c
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py -k "register_fed or bit_exact" > $OUT/pytest_changed.txt 2>&1
echo "pytest rc=$? ${SECONDS}s"; tail -3 $OUT/pytest_changed.txt; grep -E "^FAILED|^E " $OUT/pytest_changed.txt | head
SGL_FP8_GIT=dd6063c timeout 150 python3 tools/regmma_probe.py --ms 1,2 --variants 0,8192 --out $OUT/probe > $OUT/probe.txt 2>&1
echo "probe rc=$? ${SECONDS}s"; grep -E "^us|^[0-9]+x|geometric" $OUT/probe.txt | tail -20
