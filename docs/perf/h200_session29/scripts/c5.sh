#!/usr/bin/env bash
# Session 29 call 5: the tool after its review (d8b7a5e: one Setup for every mode): --quick (run()) and
# --chain once more, to check both paths run and their checksums hold.
set -u
SECONDS=0
D=$OUT/c5; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
SGL_FP8_GIT=d8b7a5e timeout 120 python3 tools/stream_ceiling.py --quick --out $D/quick > $D/quick.txt 2>&1
echo "quick rc=$? ${SECONDS}s"; grep -v "^\[" $D/quick.txt | tail -22
SGL_FP8_GIT=d8b7a5e timeout 250 python3 tools/stream_ceiling.py --chain --out $D/chain > $D/chain.txt 2>&1
echo "chain rc=$? ${SECONDS}s"; grep -c WARNING $D/chain.txt; grep -v "^\[" $D/chain.txt | grep -v "^  N=" | grep -v building | tail -24
cd $OUT && tar czf c5.tgz c5 && rm -rf c5
