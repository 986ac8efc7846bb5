#!/usr/bin/env bash
# Session 37 call 5: the 16-row register-fed GEMM quantizing its bf16 activations in the kernel (SPEC §3.1, fp32
# scales; 8192 / 8195 / 8200 / 8704) beside the same GEMM on pre-quantized e4m3 input (0 / 3 / 8 / 11) and the fused op.
set -u
SECONDS=0
D=$OUT/c5; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 400 python3 tools/regmma_probe.py --variants 0,3,8192,8195,8200,8704,8,11 --out $D > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"
grep -E "^us|^[0-9]+x|geometric" $D/probe.txt
cd $OUT && tar czf c5.tgz c5 && rm -rf c5
