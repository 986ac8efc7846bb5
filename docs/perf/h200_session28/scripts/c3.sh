#!/usr/bin/env bash
# Session 28 call 3: per-CTA timelines of the co-resident variant against the 4-warpgroup default
# on 4096x2048 and 8192x1024 (whose shares its ring holds) at 1 and 4 tokens, back to back and
# after a copy kernel: what a launch's chain is once its weight share has landed before the release.
set -u
SECONDS=0
D=$OUT/c3; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
V=default,co_resident,stream_alone,co_resident_stream_alone
timeout 200 python3 tools/gemm_timeline.py --out $D/none --cases 4096x2048:1,4 --variants $V > $D/none.txt 2>&1
echo "none rc=$? ${SECONDS}s"; grep -v -i warn $D/none.txt | tail -40
timeout $((560 - SECONDS)) python3 tools/gemm_timeline.py --out $D/copy --cases 4096x2048:1,4 --variants $V --after copy > $D/copy.txt 2>&1
echo "copy rc=$? ${SECONDS}s"; grep -v -i warn $D/copy.txt | tail -40
cd $OUT && tar czf c3.tgz c3 && rm -rf c3
