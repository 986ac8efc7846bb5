#!/usr/bin/env bash
# Session 40 call 2 at c6f0e91 (the landed head): every issue-3 target against the measured bounds, from ONE device
# call (one H200, one build): bench (floor, fused op, quant + cuBLASLt), tools/stream_ceiling.py --chain (the
# no-arithmetic chain) and --chain-timed (the TMA kernel's stream + MMAs alone, flag 6, and the read-once consumer),
# and tools/regmma_probe.py variants 0 (the 16-row register-fed GEMM on e4m3 input, loads above the wait), 3 (its
# loads alone) and 8192 (the same GEMM quantizing bf16 activations), with the fused op's register-fed kernel forced.
set -u
SECONDS=0
GIT=c6f0e91
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,pci.bus_id,clocks.max.sm --format=csv,noheader | tee $D/gpu.txt
MAX_JOBS=16 python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 90 python3 -m sglang_fp8ext bench --out $D > $D/bench.txt 2>&1; echo "bench rc=$? ${SECONDS}s"; grep -E "geometric|e8m0 /" $D/bench.txt
(cd $OUT && tar czf c2.tgz c2)
SGL_FP8_GIT=$GIT timeout 70 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1; echo "chain rc=$? ${SECONDS}s"
(cd $OUT && tar czf c2.tgz c2)
SGL_FP8_GIT=$GIT timeout 130 python3 tools/regmma_probe.py --ms 1,4,8,16 --variants 0,3,8192 --out $D/probe > $D/probe.txt 2>&1; echo "probe rc=$? ${SECONDS}s"; grep -E "^us|^[0-9]+x|geometric" $D/probe.txt | tail -24
(cd $OUT && tar czf c2.tgz c2)
L=$((400 - SECONDS)); [ $L -gt 150 ] && L=150
SGL_FP8_GIT=$GIT timeout $L python3 tools/stream_ceiling.py --chain-timed --out $D/timed > $D/timed.txt 2>&1; echo "timed rc=$? ${SECONDS}s"
cd $OUT && tar czf c2.tgz c2 && rm -rf c2
