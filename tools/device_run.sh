#!/usr/bin/env bash
# The GPU verification command: run it on an sm_90 machine (H100/H200, CUDA toolkit, torch with
# CUDA) before landing a change to the CUDA kernels, the dispatch or the tuned table, and to
# produce the figures docs/benchmarks.md is generated from. From the repository root:
#
#   OUT=/tmp/out SGL_FP8_GIT=$(git rev-parse HEAD) bash tools/device_run.sh [STEP ...]
#
# It builds the CUDA backend in place from the working tree, or, with SGL_FP8_WHEEL=path/to.whl,
# installs that wheel with pip instead (no build: the wheel CI built is what gets tested) and runs
# every step from outside the tree, so that the installed package is the one imported. Then it runs
# the named steps in order (all of them when none is named), with full logs under $OUT and a short
# summary on stdout:
#   tests      the GPU test suite (pytest -m gpu)
#   memcheck   compute-sanitizer memcheck over tools/sanitize_smoke.py
#   racecheck  compute-sanitizer racecheck over tools/sanitize_smoke.py --quick
#   check      python -m sglang_fp8ext check
#   bench      python -m sglang_fp8ext bench --shapes spec (the seven SPEC §6 shapes; writes $OUT/h200.json
#              on an H200, h100.json on an H100, gpu.json elsewhere, and a plot with matplotlib)
#   e2e        tools/e2e_decode_bench.py (the decode step; writes $OUT/e2e_decode.json)
# Every step packs $OUT into $OUT/results.tgz, so a run cut off early still returns its finished
# steps. SGL_FP8_GIT names the commit being measured (a copied tree may have no .git).
set -u
OUT=${OUT:-/tmp/sgl_fp8_out}
mkdir -p "$OUT"
ROOT=$PWD
PY=${PY:-python3}
say() { echo "== $* (${SECONDS}s)"; }
[ $# -gt 0 ] || set -- tests memcheck racecheck check bench e2e

if [ -n "${SGL_FP8_WHEEL:-}" ]; then
  say "install $SGL_FP8_WHEEL (git ${SGL_FP8_GIT:-unknown}; not rebuilt)"
  if ! $PY -m pip install --no-deps --force-reinstall "$SGL_FP8_WHEEL" >"$OUT/install.log" 2>&1; then
    tail -20 "$OUT/install.log"
    exit 1
  fi
  export SGL_FP8_EXPECT_INSTALLED=1
  cd "$(mktemp -d)"
else
  say "build (git ${SGL_FP8_GIT:-unknown})"
  if ! MAX_JOBS=16 $PY setup.py build_ext --inplace >"$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    exit 1
  fi
  export PYTHONPATH=$ROOT
fi
$PY -c "import torch, sglang_fp8ext as fx; print('sglang_fp8ext', fx.__file__, 'backend', fx.BUILT_BACKEND, fx.BUILT_DEVICE_ARCHS, 'torch', torch.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=uuid,pci.bus_id,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader | tee "$OUT/gpu_identity.txt"

for step in "$@"; do
  case "$step" in
    tests)
      say "GPU tests (-m gpu)"
      $PY -m pytest -q -p no:cacheprovider -m gpu -n 4 "$ROOT/tests" >"$OUT/pytest_gpu.txt" 2>&1; echo "rc=$?"
      grep -E "^(FAILED|ERROR)" "$OUT/pytest_gpu.txt" | head -20
      tail -3 "$OUT/pytest_gpu.txt"
      ;;
    memcheck)
      say "compute-sanitizer memcheck"
      timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $PY "$ROOT/tools/sanitize_smoke.py" >"$OUT/memcheck.txt" 2>&1
      echo "rc=$?"; tail -2 "$OUT/memcheck.txt"
      ;;
    racecheck)
      say "compute-sanitizer racecheck (quick)"
      timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $PY "$ROOT/tools/sanitize_smoke.py" --quick >"$OUT/racecheck.txt" 2>&1
      echo "rc=$?"; tail -2 "$OUT/racecheck.txt"
      ;;
    check)
      say "python -m sglang_fp8ext check"
      timeout 120 $PY -m sglang_fp8ext check >"$OUT/check.txt" 2>&1; echo "rc=$?"; grep -E "FAIL|passed|failed" "$OUT/check.txt" | tail -5
      ;;
    bench)
      say "python -m sglang_fp8ext bench --shapes spec"
      # docs/perf names each card's results after it (h200.json, h100.json)
      case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
        *H200*) CARD=h200 ;; *H100*) CARD=h100 ;; *) CARD=gpu ;;
      esac
      timeout 420 $PY -m sglang_fp8ext bench --shapes spec --out "$OUT" --name $CARD >"$OUT/bench.txt" 2>"$OUT/bench.err"; echo "rc=$?"
      tail -40 "$OUT/bench.txt"
      ;;
    e2e)
      say "tools/e2e_decode_bench.py"
      timeout 100 $PY "$ROOT/tools/e2e_decode_bench.py" --out "$OUT/e2e_decode.json" >"$OUT/e2e.txt" 2>"$OUT/e2e.err"; echo "rc=$?"
      tail -8 "$OUT/e2e.txt"
      ;;
    *) echo "unknown step $step (steps: tests memcheck racecheck check bench e2e)"; exit 2 ;;
  esac
  (cd "$OUT" && tar czf /tmp/sgl_fp8_partial.tgz --exclude=results.tgz . && mv /tmp/sgl_fp8_partial.tgz results.tgz)
done
# one archive: the device run returns a limited number of files
(cd "$OUT" && tar czf /tmp/sgl_fp8_results.tgz --exclude=results.tgz . && find . -mindepth 1 -delete && mv /tmp/sgl_fp8_results.tgz results.tgz)
say "done"
