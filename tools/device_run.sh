#!/usr/bin/env bash
# One call on the lent GPU machine: build the CUDA backend in place from the working tree, then
# run the named steps in order, with full logs under $OUT and a short summary on stdout.
#   bash tools/device_run.sh wgprobe diag errors tests suite smoke memcheck racecheck probe tune check bench e2e diagnose
#                            timeline ceiling plan_copies config_ab
# SGL_FP8_GIT names the commit being measured (the device copy has no .git).
set -u
OUT=${OUT:-/tmp/sgl_fp8_out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD
PY=${PY:-python3}
say() { echo "== $* (${SECONDS}s)"; }

say "build (git ${SGL_FP8_GIT:-unknown})"
if ! MAX_JOBS=16 $PY setup.py build_ext --inplace >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  exit 1
fi
$PY -c "import torch, sglang_fp8ext as fx; print('backend', fx.BUILT_BACKEND, fx.BUILT_DEVICE_ARCHS, 'torch', torch.__version__, torch.cuda.get_device_name())"
nvidia-smi --query-gpu=uuid,pci.bus_id,clocks.max.sm,clocks.max.mem,power.limit --format=csv,noheader | tee "$OUT/gpu_identity.txt"

for step in "$@"; do
  case "$step" in
    diag)
      say "diag: who defines std::ostream inserters, and the error-path probe"
      nm -C -D --defined-only sglang_fp8ext/_C*.so | grep -E "_M_insert|ostream" >"$OUT/nm_so_defined.txt"
      echo "symbols defined by _C.so matching _M_insert|ostream: $(wc -l <"$OUT/nm_so_defined.txt")"
      find build -name "*.o" | while read -r o; do echo "## $o"; nm -C "$o" | grep -E "_M_insert<" ; done >"$OUT/nm_objects.txt"
      grep -c " [WTt] .*_M_insert<" "$OUT/nm_objects.txt" | sed 's/^/objects defining _M_insert<..>: /'
      $PY tools/crash_probe.py >"$OUT/crash_probe.txt" 2>&1; echo "crash_probe rc=$?"; tail -4 "$OUT/crash_probe.txt"
      ;;
    errors)
      say "tests/test_errors.py (CPU and GPU tensors on the CUDA build)"
      $PY -m pytest -q -p no:cacheprovider tests/test_errors.py >"$OUT/pytest_errors.txt" 2>&1; echo "rc=$?"
      tail -3 "$OUT/pytest_errors.txt"
      ;;
    tests)
      say "GPU tests (-m gpu)"
      $PY -m pytest -q -p no:cacheprovider -m gpu -n 4 tests >"$OUT/pytest_gpu.txt" 2>&1; echo "rc=$?"
      grep -E "^(FAILED|ERROR)" "$OUT/pytest_gpu.txt" | head -20
      tail -3 "$OUT/pytest_gpu.txt"
      ;;
    suite)
      say "whole suite on the CUDA build"
      timeout 420 $PY -m pytest -q -p no:cacheprovider -n 16 -rs tests >"$OUT/pytest_all.txt" 2>&1; echo "rc=$?"
      grep -E "^(FAILED|ERROR)" "$OUT/pytest_all.txt" | head -20
      tail -3 "$OUT/pytest_all.txt"
      ;;
    layout_tests)
      say "GPU tests of the layouts and kernels (-k shuffled / ring_and_register)"
      timeout 180 $PY -m pytest -q -p no:cacheprovider -m gpu -n 4 tests -k "shuffled or ring_and_register" >"$OUT/pytest_layouts.txt" 2>&1; echo "rc=$?"
      grep -E "^(FAILED|ERROR)" "$OUT/pytest_layouts.txt" | head -10; tail -2 "$OUT/pytest_layouts.txt"
      ;;
    smoke)
      say "tools/gpu_smoke.py"
      timeout 150 $PY tools/gpu_smoke.py >"$OUT/smoke.txt" 2>&1; echo "rc=$? fails=$(grep -c '^FAIL' "$OUT/smoke.txt")"; grep "^FAIL" "$OUT/smoke.txt" | head -12
      ;;
    memcheck)
      say "compute-sanitizer memcheck"
      timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $PY tools/sanitize_smoke.py >"$OUT/memcheck.txt" 2>&1
      echo "rc=$?"; tail -2 "$OUT/memcheck.txt"
      ;;
    racecheck)
      say "compute-sanitizer racecheck (quick)"
      timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $PY tools/sanitize_smoke.py --quick >"$OUT/racecheck.txt" 2>&1
      echo "rc=$?"; tail -2 "$OUT/racecheck.txt"
      ;;
    bench)
      say "bench"
      timeout 150 $PY -m sglang_fp8ext bench --out "$OUT" --name h200 >"$OUT/bench.txt" 2>"$OUT/bench.err"; echo "rc=$?"
      tail -40 "$OUT/bench.txt"
      ;;
    diagnose)
      say "bench --diagnose (5120x4096)"
      $PY -m sglang_fp8ext bench --diagnose --shapes 5120x4096 --ms 1,8,32 --out "$OUT" --name h200_diagnose \
        >"$OUT/diagnose.txt" 2>"$OUT/diagnose.err"; echo "rc=$?"
      tail -30 "$OUT/diagnose.txt"
      ;;
    dispatch_tests)
      say "tests of the dispatch policy, the module and the e2e decode (CPU + GPU variants)"
      timeout 200 $PY -m pytest -q -p no:cacheprovider -n 16 -rs tests/test_e2e_decode.py tests/test_module.py \
        tests/test_dispatch.py tests/test_linear.py tests/test_compile.py tests/test_gpu.py >"$OUT/pytest_dispatch.txt" 2>&1
      echo "rc=$?"; grep -E "^(FAILED|ERROR)" "$OUT/pytest_dispatch.txt" | head -20; tail -2 "$OUT/pytest_dispatch.txt"
      ;;
    tune)
      say "tune (SPEC §6 shapes) into sglang_fp8ext/configs"
      timeout 260 $PY -m sglang_fp8ext tune --shapes 5120x4096,4608x4096,4096x2048 --out sglang_fp8ext/configs \
        >"$OUT/tune_qwen.txt" 2>"$OUT/tune_qwen.err"; echo "rc=$?"
      timeout 200 $PY -m sglang_fp8ext tune --shapes 8192x1024,4096x1024,1536x4096,2112x7168 --out sglang_fp8ext/configs \
        >"$OUT/tune_dsv.txt" 2>"$OUT/tune_dsv.err"; echo "rc=$?"
      cp sglang_fp8ext/configs/*.json "$OUT/" 2>/dev/null; tail -5 "$OUT/tune_dsv.txt"
      ;;
    tune_qwen)
      say "tune (the Qwen3.5 shapes of SPEC §6; other shapes' entries kept) into sglang_fp8ext/configs"
      timeout 150 $PY -m sglang_fp8ext tune --shapes 5120x4096,4608x4096,4096x2048 --out sglang_fp8ext/configs \
        >"$OUT/tune_qwen.txt" 2>"$OUT/tune_qwen.err"; echo "rc=$?"
      cp sglang_fp8ext/configs/*.json "$OUT/" 2>/dev/null; tail -5 "$OUT/tune_qwen.txt"
      ;;
    check)
      say "python -m sglang_fp8ext check"
      timeout 120 $PY -m sglang_fp8ext check >"$OUT/check.txt" 2>&1; echo "rc=$?"; grep -E "FAIL|passed|failed" "$OUT/check.txt" | tail -5
      ;;
    e2e)
      say "tools/e2e_decode_bench.py"
      timeout 100 $PY tools/e2e_decode_bench.py --out "$OUT/e2e_decode.json" >"$OUT/e2e.txt" 2>"$OUT/e2e.err"; echo "rc=$?"
      tail -8 "$OUT/e2e.txt"
      ;;
    timeline)
      say "tools/gemm_timeline.py (per-CTA phase stamps across back-to-back launches)"
      timeout 150 $PY tools/gemm_timeline.py --out "$OUT" --cases "${SGL_FP8_TIMELINE_CASES:-5120x4096:1,8,32}" \
        --variants "${SGL_FP8_TIMELINE_VARIANTS:-default,stream_alone,no_prologue}" --after "${SGL_FP8_TIMELINE_AFTER:-none}" \
        >"$OUT/timeline.txt" 2>&1
      echo "rc=$?"; cut -c1-400 "$OUT/timeline.txt" | tail -12
      ;;
    ceiling)
      say "tools/stream_ceiling.py (how fast any kernel streams the weight bytes)"
      timeout 150 $PY tools/stream_ceiling.py --out "$OUT" >"$OUT/ceiling.txt" 2>&1
      echo "rc=$?"; tail -45 "$OUT/ceiling.txt"
      ;;
    plan_copies)
      say "tools/stream_ceiling.py --plan-copies (the fused kernel's copy pattern alone, beside bulk copies)"
      timeout 240 $PY tools/stream_ceiling.py --plan-copies --out "$OUT" >"$OUT/plan_copies.txt" 2>&1
      echo "rc=$?"; tail -45 "$OUT/plan_copies.txt"
      ;;
    wgprobe)
      say "tools/wgmma_probe.py (where a GEMM output goes wrong)"
      timeout 120 $PY tools/wgmma_probe.py --ms "${SGL_FP8_PROBE_MS:-1,5,8,16,20,32}" >"$OUT/wgmma_probe.txt" 2>&1; echo "rc=$?"; tail -30 "$OUT/wgmma_probe.txt"
      grep -q "probe: 0 bad" "$OUT/wgmma_probe.txt" || { echo "probe failed: stopping"; break; }
      ;;
    config_ab)
      say "tools/config_ab.py (configs against each other: ${SGL_FP8_AB_CONFIGS:-unset})"
      timeout ${SGL_FP8_AB_TIMEOUT:-200} $PY tools/config_ab.py --out "$OUT" --configs "$SGL_FP8_AB_CONFIGS" \
        --shapes "${SGL_FP8_AB_SHAPES:-5120x4096,4608x4096,4096x2048}" --ms "${SGL_FP8_AB_MS:-1,2,4,8,16}" \
        --scales "${SGL_FP8_AB_SCALES:-fp32}" --after "${SGL_FP8_AB_AFTER:-none}" >"$OUT/config_ab.txt" 2>&1
      echo "rc=$?"; tail -40 "$OUT/config_ab.txt"
      ;;
    probe)
      say "tools/scaled_mm_probe.py"
      timeout 60 $PY tools/scaled_mm_probe.py >"$OUT/scaled_mm_probe.txt" 2>&1; echo "rc=$?"; cat "$OUT/scaled_mm_probe.txt" | tail -14
      ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  # pack what exists so far: if the call is cut off, the last complete step's results come back
  (cd "$OUT" && tar czf /tmp/sgl_fp8_partial.tgz --exclude=results.tgz . && mv /tmp/sgl_fp8_partial.tgz results.tgz)
done
# the run tool returns a limited number of files: pack them into one
(cd "$OUT" && tar czf /tmp/sgl_fp8_results.tgz --exclude=results.tgz . && find . -mindepth 1 -delete && mv /tmp/sgl_fp8_results.tgz results.tgz)
say "done"
