#!/usr/bin/env bash
# Session 27 call 7: the split-free rule's GPU test with 6144x768 in place of 4096x512 (whose two
# splits rounded alike), and racecheck over the sanitize sweep's quick set.
set -u
SECONDS=0
D=$OUT/c7; mkdir -p $D
nvidia-smi --query-gpu=uuid,name,clocks.max.sm --format=csv,noheader > $D/gpu.txt
python3 setup.py build_ext --inplace > $D/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "without_a_k_split or co_resident_variant_only" > $D/pytest_rule.txt 2>&1; echo "rule tests rc=$? ${SECONDS}s"; tail -3 $D/pytest_rule.txt
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
