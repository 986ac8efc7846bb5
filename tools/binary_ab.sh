#!/usr/bin/env bash
# Binary against binary, on one GPU machine in one call: build several versions of the extension,
# then time them in alternating rounds. A runtime A/B flag inside a kernel changes the code of both
# of its paths (docs/sm90.md, session 11), so a kernel change is decided here, build against build.
#
#   bash tools/binary_ab.sh ROUNDS NAME=TARBALL [NAME=TARBALL ...] -- STEP [STEP ...]
#
# Each TARBALL is a whole source tree (`git archive -o .ab/NAME.tar REV`; .ab/ is git-ignored, so
# carry it to the device). Steps, run for every version in every round (the order of the versions
# reverses each round, so that drift on the machine falls on all of them alike):
#   bench   python -m sglang_fp8ext bench (every SPEC §6 Qwen point, fp32 and e8m0, with its peers)
#   e2e     tools/e2e_decode_bench.py --batches ${SGL_FP8_AB_E2E_BATCHES:-1,8} --replays 30
#   ab_none, ab_copy   tools/config_ab.py --configs default, back to back or --after copy (a torch copy
#           kernel before every GEMM, as in a decode step); SGL_FP8_AB_SHAPES, SGL_FP8_AB_MS,
#           SGL_FP8_AB_SCALES choose the points, SGL_FP8_AB_CONFIGS the configs (default: "default")
#   e2e_profile   tools/e2e_kernel_profile.py (the decode step's kernels, each one's marginal time)
#   seq     tools/sequence_profile.py --sequences "$SGL_FP8_AB_SEQ" (GEMMs among other kernels)
#   tests   pytest -m gpu (once, in the first round only)
# Results go to $OUT/binary_ab (JSON per version, round and step, build logs), then
# tools/binary_ab_report.py prints every point's time per version against the first version's.
# Name each version by its commit: results record the name as their "git".
set -u
OUT=${OUT:-/tmp/sgl_fp8_out}
PY=${PY:-python3}
ROOT=${AB_ROOT:-/tmp/binary_ab}
say() { echo "== $* (${SECONDS}s)"; }
rounds=$1; shift
names=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do names+=("$1"); shift; done
shift  # --
steps=("$@")
res="$OUT/binary_ab"
mkdir -p "$res" "$ROOT"
echo "versions: ${names[*]}; rounds: $rounds; steps: ${steps[*]}" | tee "$res/README.txt"

# Build every version at once (the long pole is one nvcc process per version).
jobs=$(( $(nproc) / ${#names[@]} )); [ "$jobs" -lt 1 ] && jobs=1
versions=()
for spec in "${names[@]}"; do
  name=${spec%%=*}; tarball=${spec#*=}
  versions+=("$name")
  rm -rf "$ROOT/$name"; mkdir -p "$ROOT/$name"
  tar -xf "$tarball" -C "$ROOT/$name" || { echo "cannot unpack $tarball"; exit 1; }
  (cd "$ROOT/$name" && MAX_JOBS=$jobs $PY setup.py build_ext --inplace >"$res/build_$name.log" 2>&1; echo $? >"$res/build_$name.rc") &
done
say "building ${versions[*]} ($jobs jobs each)"
wait
for v in "${versions[@]}"; do
  if [ "$(cat "$res/build_$v.rc")" != 0 ]; then echo "build of $v failed:"; tail -30 "$res/build_$v.log"; exit 1; fi
done
say "built"
nvidia-smi --query-gpu=uuid,pci.bus_id,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader | tee "$res/gpu_identity.txt"

order=("${versions[@]}")
for r in $(seq 1 "$rounds"); do
  for v in "${order[@]}"; do
    for step in "${steps[@]}"; do
      (
        cd "$ROOT/$v" && export PYTHONPATH=$PWD SGL_FP8_GIT=$v
        case "$step" in
          bench)
            timeout 150 $PY -m sglang_fp8ext bench --out "$res" --name "bench_${v}_r$r" >"$res/bench_${v}_r$r.txt" 2>&1
            echo "round $r $v bench rc=$?";;
          e2e)
            timeout 120 $PY tools/e2e_decode_bench.py --batches "${SGL_FP8_AB_E2E_BATCHES:-1,8}" --replays 30 \
              --out "$res/e2e_${v}_r$r.json" >"$res/e2e_${v}_r$r.txt" 2>&1
            echo "round $r $v e2e rc=$?";;
          ab_none|ab_copy)  # tools/config_ab.py (the default config unless SGL_FP8_AB_CONFIGS), back to back or after a copy kernel
            timeout ${SGL_FP8_AB_TIMEOUT:-200} $PY tools/config_ab.py --configs "${SGL_FP8_AB_CONFIGS:-default}" --after "${step#ab_}" \
              --shapes "${SGL_FP8_AB_SHAPES:-5120x4096,4608x4096,4096x2048}" --ms "${SGL_FP8_AB_MS:-1,4,8,16}" \
              --scales "${SGL_FP8_AB_SCALES:-fp32}" --out "$res/${step}_${v}_r$r" >"$res/${step}_${v}_r$r.txt" 2>&1
            echo "round $r $v $step rc=$?"
            mv "$res/${step}_${v}_r$r/config_ab.json" "$res/${step}_${v}_r$r.json" && rmdir "$res/${step}_${v}_r$r";;
          e2e_profile)
            timeout 150 $PY tools/e2e_kernel_profile.py --batches "${SGL_FP8_AB_E2E_BATCHES:-1,8}" --replays 30 \
              --out "$res/e2e_profile_${v}_r$r.json" >"$res/e2e_profile_${v}_r$r.txt" 2>&1
            echo "round $r $v e2e_profile rc=$?";;
          seq)  # tools/sequence_profile.py over SGL_FP8_AB_SEQ (";"-separated sequences)
            timeout 200 $PY tools/sequence_profile.py --sequences "$SGL_FP8_AB_SEQ" \
              --out "$res/seq_${v}_r$r.json" >"$res/seq_${v}_r$r.txt" 2>&1
            echo "round $r $v seq rc=$?";;
          tests)
            if [ "$r" = 1 ]; then
              $PY -m pytest -q -p no:cacheprovider -m gpu -n 4 tests >"$res/pytest_gpu_$v.txt" 2>&1
              echo "$v tests rc=$? $(tail -1 "$res/pytest_gpu_$v.txt")"
            fi;;
          *) echo "unknown step $step";;
        esac
      )
    done
  done
  say "round $r done"
  # reverse the order for the next round
  rev=(); for ((i=${#order[@]}-1; i>=0; i--)); do rev+=("${order[$i]}"); done; order=("${rev[@]}")
done
rm -f "$res"/*.png
$PY "$PWD/tools/binary_ab_report.py" "$res" "${versions[@]}" | tee "$res/report.txt"
