#!/usr/bin/env bash
# Session 39 call 4: the register-fed kernel (forced, flag 32768), four builds: dd6063c (block scales at entry, four
# weight blocks in flight), 66ba02c (two in flight), 27142b0 (the activation type's branch outside the quantization's
# pass loop), f45c8f2 (both); 2 rounds back to back and after a copy kernel on the 5 shapes it serves or nearly serves at
# 1-2 tokens (fp32).
set -u
SECONDS=0
export SGL_FP8_AB_SHAPES=5120x4096,4608x4096,4096x2048,4096x1024,2112x7168
export SGL_FP8_AB_MS=1,2 SGL_FP8_AB_SCALES=fp32 SGL_FP8_AB_CONFIGS="[0,0,0,0,32768]"
bash tools/binary_ab.sh 2 dd6063c=.ab/dd6063c.tar 66ba02c=.ab/66ba02c.tar 27142b0=.ab/27142b0.tar f45c8f2=.ab/f45c8f2.tar \
  -- ab_none ab_copy > $OUT/binary_ab.txt 2>&1
echo "binary_ab rc=$? ${SECONDS}s"; grep -v "^round" $OUT/binary_ab.txt | tail -30
cd $OUT && tar czf c4.tgz binary_ab binary_ab.txt && rm -rf binary_ab
