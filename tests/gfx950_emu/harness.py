"""Builds and loads the emulated gfx950 library (tests/gfx950_emu/README.md).

build(variant) compiles kernels/gfx950/*.hip unmodified as host C++ with clang++-16 against the
stand-in hip/hip_runtime.h, plus the emulator runtime and the C API, into one shared library,
cached under $SGL_FP8_EMU_CACHE (default ~/.cache/sglang-fp8ext/gfx950_emu) by a hash of every
source, the compiler version, the flags and the variant. Emu wraps it with ctypes on numpy arrays.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EMU_DIR = Path(__file__).resolve().parent
KERNEL_SOURCES = sorted((ROOT / "kernels" / "gfx950").glob("*.hip"))
EMU_SOURCES = [EMU_DIR / "emu_runtime.cpp", EMU_DIR / "emu_api.cpp", EMU_DIR / "emu_selftest.cpp"]
HASHED = sorted(
    list((ROOT / "kernels" / "gfx950").glob("*")) + list((ROOT / "kernels" / "common").glob("*"))
    + list(EMU_DIR.glob("*.cpp")) + list(EMU_DIR.glob("*.h")) + list((EMU_DIR / "include" / "hip").glob("*.h"))
)
CXX = os.environ.get("SGL_FP8_EMU_CXX", "clang++-16")  # override: e.g. to test the skip path
# -ffp-contract=off: no FMA contraction the source does not ask for (the kernels call fmaf
# explicitly where they want one); no -march: baseline x86-64, no FMA instructions at all.
FLAGS = ["-std=c++20", "-O2", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Wno-psabi",
         "-Wno-unused-const-variable", "-I", str(EMU_DIR / "include"), "-I", str(EMU_DIR), "-I", str(ROOT / "kernels"),
         "-I", str(ROOT)]
# Deliberately broken emulators (README.md): each must make the tests fail.
BREAKS = ("DPP_MIRROR", "MFMA_ROWS", "TIE_AWAY", "DROP_BARRIER", "DROP_WAVE_BARRIER")

ELEM = {"bf16": 0, "fp16": 1, "e4m3": 2}


def compiler() -> str | None:
    return shutil.which(CXX)


def _cache_dir() -> Path:
    base = os.environ.get("SGL_FP8_EMU_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "sglang-fp8ext",
                                                                "gfx950_emu")
    return Path(base)


def build(variant: str | None = None) -> Path:
    """Path of the shared library for `variant` (None: the faithful emulator; else a BREAKS name)."""
    cxx = compiler()
    if cxx is None:
        raise FileNotFoundError(f"{CXX} not found on PATH")
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    flags = FLAGS + ([f"-DEMU_BREAK_{variant}"] if variant else [])
    h = hashlib.sha256()
    h.update(version.encode())
    h.update(" ".join(flags).encode())
    for p in HASHED:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    key = h.hexdigest()[:20]
    out = _cache_dir() / f"libgfx950emu-{variant or 'faithful'}-{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        jobs = []
        for src in KERNEL_SOURCES:
            jobs.append([cxx, "-x", "c++"] + flags + ["-c", str(src), "-o", os.path.join(tmp, src.stem + ".o")])
        for src in EMU_SOURCES:
            jobs.append([cxx] + flags + ["-c", str(src), "-o", os.path.join(tmp, src.stem + ".o")])
        with ThreadPoolExecutor(max_workers=2) as pool:
            procs = list(pool.map(lambda c: subprocess.run(c, capture_output=True, text=True), jobs))
        for cmd, proc in zip(jobs, procs):
            if proc.returncode != 0:
                raise RuntimeError(f"compiling for the emulator failed:\n{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
        objs = [j[-1] for j in jobs]
        tmp_so = os.path.join(tmp, "lib.so")
        link = [cxx, "-shared", "-o", tmp_so] + objs + ["-lpthread", "-lm"]
        proc = subprocess.run(link, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"linking the emulator failed:\n{' '.join(link)}\n{proc.stderr}")
        os.replace(tmp_so, out)  # atomic: concurrent builders never see a partial file
    return out


def _ptr(a) -> ctypes.c_void_p:
    return ctypes.c_void_p(0 if a is None else a.ctypes.data)


class Emu:
    """ctypes wrapper of one built library."""

    def __init__(self, path: Path):
        self.path = path
        lib = ctypes.CDLL(str(path))
        self.lib = lib
        i64, i32, vp, u64 = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64
        lib.emu_configure.argtypes = [i32, i32, u64]
        lib.emu_counter_name.restype = ctypes.c_char_p
        lib.emu_counter.restype = u64
        lib.emu_error_detail.restype = ctypes.c_char_p
        lib.emu_set_region.argtypes = [i32, vp, u64]
        lib.emu_set_arch.argtypes = [ctypes.c_char_p]
        lib.emu_launch_record.argtypes = [i32, ctypes.POINTER(u64)]
        lib.emu_per1x128_quant.restype = ctypes.c_char_p
        lib.emu_per1x128_quant.argtypes = [vp, i32, i64, i64, i64, i32, vp, vp, i64, i64]
        lib.emu_rmsnorm_quant.restype = ctypes.c_char_p
        lib.emu_rmsnorm_quant.argtypes = [vp, vp, vp, i32, i64, i64, i64, i64, ctypes.c_float, i32, vp, vp, vp]
        lib.emu_block_scaled_gemm.restype = ctypes.c_char_p
        lib.emu_block_scaled_gemm.argtypes = [vp, i64, i32, vp, i64, i64, vp, i32, vp, i32, vp, vp, i32, i64, i64, i64,
                                              i32, i32]
        lib.emu_device_supported.argtypes = [i32, ctypes.POINTER(ctypes.c_char_p)]
        lib.emu_selftest_divergent.argtypes = [vp, vp]
        lib.emu_selftest_dpp.argtypes = [vp, i32]
        lib.emu_selftest_mfma.argtypes = [vp, vp, vp, vp, vp, i32, i32, vp, i32]
        lib.emu_selftest_cvt.argtypes = [vp, vp, i32]
        lib.emu_selftest_buffer.argtypes = [vp, ctypes.c_uint32, ctypes.c_uint32, vp]
        lib.emu_selftest_lds.argtypes = [vp]
        self.names = [lib.emu_counter_name(i).decode() for i in range(lib.emu_counter_count())]
        self.configure()

    # ---- control -----------------------------------------------------------------------------
    def configure(self, threads: int = 2, schedule: int = 0, seed: int = 1):
        self.lib.emu_configure(threads, schedule, seed)

    def reset(self):
        self.lib.emu_reset()

    def counters(self) -> dict:
        return {n: int(self.lib.emu_counter(i)) for i, n in enumerate(self.names)}

    def launches(self) -> list:
        out = []
        buf = (ctypes.c_uint64 * 7)()
        for i in range(self.lib.emu_launch_count()):
            self.lib.emu_launch_record(i, buf)
            out.append(dict(grid=(buf[0], buf[1], buf[2]), block=(buf[3], buf[4], buf[5]), lds=buf[6]))
        return out

    def set_region(self, slot: int, arr):
        self.lib.emu_set_region(slot, _ptr(arr), 0 if arr is None else arr.nbytes)

    def _check(self, err):
        detail = self.lib.emu_error_detail()
        if err is not None:
            raise RuntimeError(f"launcher error: {err.decode()} ({detail.decode() if detail else ''})")
        c = self.counters()
        if c["errors"] or c["deadlocks"]:
            raise RuntimeError(f"emulation error: {detail.decode()}")

    def device_supported(self, arch: str):
        self.lib.emu_set_arch(arch.encode())
        why = ctypes.c_char_p()
        ok = self.lib.emu_device_supported(0, ctypes.byref(why))
        return bool(ok), (why.value.decode() if why.value else None)

    # ---- ops -----------------------------------------------------------------------------------
    def per1x128_quant(self, xbits: np.ndarray, dt: str, ue8m0: bool, rows: int, K: int, row_stride: int,
                       transpose_scale: bool = False):
        """xbits: uint16 buffer holding rows x K at row_stride. Returns (q [rows, K], scale)."""
        KB = K // 128
        q = np.full((rows, K), 0xCD, np.uint8)
        sdt = np.uint8 if ue8m0 else np.uint32
        scale = np.full(rows * KB, 0xCD if ue8m0 else 0xCDCDCDCD, sdt)
        srow, sgrp = (1, rows) if transpose_scale else (KB, 1)
        err = self.lib.emu_per1x128_quant(_ptr(xbits), ELEM[dt], rows, K, row_stride, int(ue8m0), _ptr(q), _ptr(scale),
                                          srow, sgrp)
        self._check(err)
        s = scale.reshape(KB, rows).T if transpose_scale else scale.reshape(rows, KB)
        return q, np.ascontiguousarray(s)

    def rmsnorm_quant(self, xbits, wbits, dt, ue8m0, rows, K, row_stride, eps, rbits=None, r_row_stride=0):
        KB = K // 128
        q = np.full((rows, K), 0xCD, np.uint8)
        scale = np.full((rows, KB), 0xCD if ue8m0 else 0xCDCDCDCD, np.uint8 if ue8m0 else np.uint32)
        rout = None if rbits is None else np.full((rows, K), 0xCDCD, np.uint16)
        err = self.lib.emu_rmsnorm_quant(_ptr(xbits), _ptr(rbits), _ptr(wbits), ELEM[dt], rows, K, row_stride,
                                         r_row_stride, ctypes.c_float(eps), int(ue8m0), _ptr(q), _ptr(scale),
                                         _ptr(rout))
        self._check(err)
        return q, scale, rout

    def gemm(self, x, x_row_stride, x_type, x_scale, xs_strides, w, w_shuffled, w_scale, e8m0, bias, out_type, M, N,
             K, k_split=0, tiles_per_wave=0):
        out = np.full((M, N), 0xCDCD, np.uint16)
        self.set_region(0, w)
        err = self.lib.emu_block_scaled_gemm(_ptr(x), x_row_stride, ELEM[x_type], _ptr(x_scale), xs_strides[0],
                                             xs_strides[1], _ptr(w), int(w_shuffled), _ptr(w_scale), int(e8m0),
                                             _ptr(bias), _ptr(out), ELEM[out_type], M, N, K, k_split, tiles_per_wave)
        self._check(err)
        return out

    # ---- the emulator's own kernels (emu_selftest.cpp) ----------------------------------------
    def selftest_divergent(self):
        out = np.zeros(128, np.int32)
        ballots = np.zeros(64, np.uint64)
        self.lib.emu_selftest_divergent(_ptr(out), _ptr(ballots))
        return out[:64], out[64:], ballots

    def selftest_dpp(self, index: int):
        out = np.zeros(64, np.int32)
        self.lib.emu_selftest_dpp(_ptr(out), index)
        return out

    def selftest_mfma(self, a, b, c, sa, sb, opsel_a, opsel_b, active=64):
        d = np.zeros((64, 4), np.float32)
        args = [np.ascontiguousarray(v) for v in (a, b, c, sa, sb)]
        self.lib.emu_selftest_mfma(*[_ptr(v) for v in args], opsel_a, opsel_b, _ptr(d), active)
        return d

    def selftest_cvt(self, values: np.ndarray):
        v = np.ascontiguousarray(values, np.float32)
        assert v.size % 4 == 0
        out = np.zeros(v.size // 4, np.uint32)
        self.lib.emu_selftest_cvt(_ptr(v), _ptr(out), v.size // 4)
        return out

    def selftest_buffer(self, data: np.ndarray, num_records: int, soffset: int):
        out = np.full(256, 0xEEEEEEEE, np.uint32)
        self.lib.emu_selftest_buffer(_ptr(data), num_records, soffset, _ptr(out))
        return out.reshape(64, 4)

    def selftest_lds(self):
        out = np.zeros(64, np.float32)
        self.lib.emu_selftest_lds(_ptr(out))
        return out
