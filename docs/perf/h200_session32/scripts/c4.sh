#!/usr/bin/env bash
# Session 32 call 4: tools/stream_ceiling.py --chain-consume (the chain's share multiplied by wgmma as
# it lands, read once or twice, by 2 or 4 warpgroups; A as 8 KB swizzled tiles, 1024-byte aligned; the 15 bench points) back
# to back and after a copy kernel, beside the fused op.
set -u
SECONDS=0
D=$OUT/c4; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 270 python3 tools/stream_ceiling.py --chain-consume --out $D/none > $D/none.txt 2>&1
echo "consume rc=$? ${SECONDS}s"
SGL_FP8_GIT=$GIT timeout 270 python3 tools/stream_ceiling.py --chain-consume --after copy --out $D/copy > $D/copy.txt 2>&1
echo "consume after copy rc=$? ${SECONDS}s"
python3 .s32/summ.py $D/none/stream_ceiling.json $D/copy/stream_ceiling.json | cut -c1-300
