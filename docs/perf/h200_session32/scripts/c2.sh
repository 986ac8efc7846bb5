#!/usr/bin/env bash
# Session 32 call 2: tools/stream_ceiling.py --chain-consume (the chain's share multiplied by wgmma as
# it lands, read once or twice; one commit group a chunk, one kept in flight: unrolled over the chunks) back
# to back and after a copy kernel, beside the fused op.
set -u
SECONDS=0
D=$OUT/c2; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 200 python3 tools/stream_ceiling.py --chain-consume --out $D/none > $D/none.txt 2>&1
echo "consume rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 200 python3 tools/stream_ceiling.py --chain-consume --after copy --out $D/copy > $D/copy.txt 2>&1
echo "consume after copy rc=$? ${SECONDS}s"
grep -v "^\[" $D/none.txt | grep -v "^  N=" | cut -c1-200 | head -80
