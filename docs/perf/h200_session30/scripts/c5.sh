#!/usr/bin/env bash
# Session 30 call 5 at 0eeb3ad: the fused kernel's own timeline (flag 16) with half / all / one of its copies at
# entry (where do the activations arrive against the last landing?), and the tool's other modes after
# this session's changes (--quick, --chain).
set -u
SECONDS=0
D=$OUT/c5; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=0eeb3ad timeout 200 python3 tools/gemm_timeline.py --out $D/timeline --cases "5120x4096:1,8;4096x2048:1" --variants default,early_all,early_1 > $D/timeline.txt 2>&1
echo "timeline rc=$? ${SECONDS}s"; grep -v "^\[" $D/timeline.txt | tail -12
SGL_FP8_GIT=0eeb3ad timeout 120 python3 tools/stream_ceiling.py --quick --out $D/quick > $D/quick.txt 2>&1
echo "quick rc=$? ${SECONDS}s"; grep -c " ok" $D/quick.txt; grep -c MISMATCH $D/quick.txt
SGL_FP8_GIT=0eeb3ad timeout 300 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -c MISMATCH $D/chain.txt; grep -A40 "geometric mean" $D/chain.txt | head -34
