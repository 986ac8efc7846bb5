#!/usr/bin/env bash
# Session 27 call 9: 3dd6324's refactored stream_ceiling.cu (BoxLayout) run once: --late-boxes (the
# checksums of every box layout and consumer), with the extension built (its import needs it; a first attempt without failed at import).
set -u
SECONDS=0
D=$OUT/c9; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 150 python3 tools/stream_ceiling.py --late-boxes --out $D/late > $D/late_boxes.txt 2>&1; echo "late boxes rc=$? ${SECONDS}s"
grep -c " ok$" $D/late_boxes.txt; grep -i "mismatch\|warn\|error" $D/late_boxes.txt | head
grep -v "^\[" $D/late_boxes.txt | grep "tensor" | head -12
cd $OUT && tar czf c9.tgz c9 && rm -rf c9
