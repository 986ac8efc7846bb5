#!/usr/bin/env python3
"""gfx950 (MI355X) kernels, verified without an AMD GPU (issue 4, item 3a/3b).

  1. Installs the SPEC §7 toolchain when it is missing (Debian 12, as root): libamdhip64-dev,
     rocm-device-libs, libclang-common-16-dev (apt) and ziglang==0.17.0 (pip; its
     `python -m ziglang clang` is clang 22 with the AMDGPU target).
  2. Compiles every kernels/gfx950/*.hip on its own for gfx950, device side to assembly (SPEC §7
     recipe plus the wheel's own flags from build_config.hipcc_flags), and host side to an object.
  3. Reads the ISA: per kernel VGPRs, AGPRs, SGPRs, LDS, scratch, spills, v_mfma_scale count,
     global/buffer loads (non-temporal ones = the weight stream), calls, division/sqrt sequences.
  4. Writes the report (default docs/gfx950_isa.md) and exits non-zero when
       - a file fails to compile (either side),
       - any kernel uses scratch (private segment > 0, spills, scratch_* instructions) or calls a
         function (the ISA numbers would then not be the kernel's),
       - a GEMM kernel has no v_mfma_scale_f32_16x16x128_f8f6f4 or no non-temporal weight load,
       - a kernel needs more than 128 VGPR+AGPR per lane (the design needs 4 waves per SIMD: the
         GEMM runs 16-wave/1024-thread workgroups, which only launch when 4 waves fit per SIMD;
         the quant/norm kernels rely on the same occupancy to hide memory latency),
       - a v_rcp_f32 is not part of an IEEE division sequence (v_div_scale/v_div_fmas/
         v_div_fixup), or v_rsq_f32 appears (SPEC §3.1: the scale inverse is correctly rounded),
       - the host objects define external symbols other than gpu_launch.h's, or define one twice
         (the .hip files must link into one library).

Usage: python .ci/check_gfx950.py [--no-install] [--report PATH|-] [--keep DIR]
No GPU is used or needed; this verifies compilation and ISA properties, not runtime behaviour.
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HIP_DIR = ROOT / "kernels" / "gfx950"
ARCH = "gfx950"
ZIGLANG_VERSION = "0.17.0"
APT_PACKAGES = ["libamdhip64-dev", "rocm-device-libs", "libclang-common-16-dev"]
CLANG_RESOURCE_DIR = "/usr/lib/llvm-16/lib/clang/16"
MAX_REGS_PER_LANE = 128  # 512 unified VGPR+AGPR per SIMD lane / 4 waves
EXPECTED_HOST_SYMBOLS = {
    "sgl_fp8::launch_block_scaled_gemm(sgl_fp8::GemmParams const&, void*)",
    "sgl_fp8::launch_per1x128_quant(sgl_fp8::QuantParams const&, void*)",
    "sgl_fp8::launch_rmsnorm_quant(sgl_fp8::NormQuantParams const&, void*)",
    "sgl_fp8::device_supported(int, char const**)",
}
# The GEMM kernels issue S*R = 4 weight units per wave per stage (two 16-byte loads per lane each).
GEMM_UNITS_PER_STAGE = 4

sys.path.insert(0, str(ROOT))
import build_config  # noqa: E402  (shared with setup.py: the wheel's flags)


def log(msg):
    print(f"[check_gfx950] {msg}", flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# ---- toolchain ---------------------------------------------------------------------------------

def zig_clang():
    return [sys.executable, "-m", "ziglang", "clang"]


def toolchain_missing():
    missing = []
    if not Path("/usr/include/hip/hip_runtime.h").exists():
        missing.append("libamdhip64-dev")
    if not Path(CLANG_RESOURCE_DIR, "include").exists():
        missing.append("libclang-common-16-dev")
    if not any(Path("/usr/lib").glob("*/amdgcn/bitcode")) and not Path("/usr/lib/amdgcn/bitcode").exists():
        missing.append("rocm-device-libs")
    if shutil.which("nm") is None or shutil.which("c++filt") is None:
        missing.append("binutils")  # nm / c++filt for the host-symbol check and kernel names
    if run(zig_clang() + ["--version"]).returncode != 0:
        missing.append(f"ziglang=={ZIGLANG_VERSION}")
    return missing


def install_toolchain(missing):
    apt = [p for p in missing if p in APT_PACKAGES + ["binutils"]]
    if apt:
        packages = APT_PACKAGES + (["binutils"] if "binutils" in apt else [])
        if os.geteuid() != 0:
            sys.exit(f"[check_gfx950] missing {apt}; run as root or: apt-get install -y {' '.join(packages)}")
        log(f"apt-get install {' '.join(packages)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends"] + packages):
            proc = run(cmd, env=env)
            if proc.returncode != 0:
                sys.exit(f"[check_gfx950] {' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    if any(p.startswith("ziglang") for p in missing):
        log(f"pip install ziglang=={ZIGLANG_VERSION}")
        pip = [sys.executable, "-m", "pip", "install", "--quiet", f"ziglang=={ZIGLANG_VERSION}"]
        proc = run(pip)
        if proc.returncode != 0 and "No module named pip" in proc.stderr and os.geteuid() == 0:
            run(["apt-get", "install", "-y", "--no-install-recommends", "python3-pip"],
                env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            proc = run(pip)
        if proc.returncode != 0 and "externally-managed-environment" in (proc.stderr + proc.stdout):
            # Debian 12's system python (PEP 668): a CI machine may install into it.
            proc = run(pip + ["--break-system-packages"])
        if proc.returncode != 0:
            sys.exit(f"[check_gfx950] pip install ziglang failed:\n{proc.stderr[-3000:]}")


# ---- compilation -------------------------------------------------------------------------------

def wheel_flags():
    """build_config's hipcc flags for gfx950 (minus --offload-arch, which the recipe sets)."""
    return [f for f in build_config.hipcc_flags([ARCH]) if not f.startswith("--offload-arch")]


def common_flags():
    return ["-x", "hip", f"--offload-arch={ARCH}", "-nogpulib", "-D__AMDGCN_WAVEFRONT_SIZE=64",
            "-resource-dir", CLANG_RESOURCE_DIR, "--rocm-path=/usr", "-I", str(ROOT / "kernels"), "-I", str(ROOT)]


def device_cmd(src, out):
    return zig_clang() + common_flags() + wheel_flags() + ["--cuda-device-only", "-S", "-o", str(out), str(src)]


def host_cmd(src, out):
    return zig_clang() + common_flags() + wheel_flags() + ["--cuda-host-only", "-fPIC", "-c", "-o", str(out), str(src)]


def compile_one(src, workdir):
    asm = workdir / (src.stem + ".s")
    obj = workdir / (src.stem + ".host.o")
    dev = run(device_cmd(src, asm), cwd=ROOT)
    host = run(host_cmd(src, obj), cwd=ROOT)
    return src, asm, obj, dev, host


# ---- ISA parsing -------------------------------------------------------------------------------

META_KEYS = {
    ".name": str, ".symbol": str, ".vgpr_count": int, ".agpr_count": int, ".sgpr_count": int,
    ".group_segment_fixed_size": int, ".private_segment_fixed_size": int, ".vgpr_spill_count": int,
    ".sgpr_spill_count": int, ".max_flat_workgroup_size": int, ".wavefront_size": int,
}


def parse_metadata(text):
    start = text.index("amdhsa.kernels:")
    end = text.index(".end_amdgpu_metadata", start)
    kernels = []
    for block in re.split(r"\n  - ", text[start:end])[1:]:
        meta = {}
        for key, conv in META_KEYS.items():
            m = re.search(rf"^\s*{re.escape(key)}:\s*(\S+)", block, re.M)
            if m:
                meta[key] = conv(m.group(1).strip("'\""))
        if ".name" in meta:
            kernels.append(meta)
    return kernels


def function_body(text, name):
    m = re.search(rf"^{re.escape(name)}:.*?$(.*?)^\.Lfunc_end", text, re.M | re.S)
    return m.group(1) if m else ""


def count(body, pattern):
    return len(re.findall(pattern, body, re.M))


def isa_counts(body):
    loads = re.findall(r"^\s*((?:global|buffer|flat)_load_\w+)([^\n]*)", body, re.M)
    return {
        "mfma_scale": count(body, r"^\s*v_mfma_scale_f32_16x16x128_f8f6f4\b"),
        "mfma_other": count(body, r"^\s*v_mfma_(?!scale_f32_16x16x128_f8f6f4)\w+"),
        "vmem_loads": len(loads),
        "nt_loads": sum(1 for op, rest in loads if re.search(r"\bnt\b", rest)),
        "nt_x4_loads": sum(1 for op, rest in loads if op.endswith("dwordx4") and re.search(r"\bnt\b", rest)),
        "smem_loads": count(body, r"^\s*s_(?:buffer_)?load_\w+"),
        "lds_ops": count(body, r"^\s*ds_(?:read|write)\w*"),
        "scratch_ops": count(body, r"^\s*scratch_\w+"),
        "calls": count(body, r"^\s*s_(?:swappc|setpc|call)_b64\b"),
        "rcp": count(body, r"^\s*v_rcp_f32"),
        "div_fixup": count(body, r"^\s*v_div_fixup_f32"),
        "rsq": count(body, r"^\s*v_rsq_f32"),
        "cvt_pk_fp8": count(body, r"^\s*v_cvt_pk_fp8_f32"),
        "instructions": count(body, r"^\s+[a-z_][a-z0-9_]*\b(?!:)"),
    }


def demangle(names):
    if not names or shutil.which("c++filt") is None:
        return {n: n for n in names}
    proc = run(["c++filt"], input="\n".join(names))
    out = proc.stdout.split("\n")
    return {n: (out[i] if i < len(out) and out[i] else n) for i, n in enumerate(names)}


def short_name(demangled):
    name = demangled.replace("sgl_fp8::gfx950::", "").replace("sgl_fp8::", "")
    name = re.sub(r"\((?:sgl_fp8::)?(?:gfx950::)?\w+\)$", "", name)
    name = name.replace("(sgl_fp8::gfx950::XKind)0", "bf16").replace("(sgl_fp8::gfx950::XKind)1", "fp16")
    name = name.replace("(sgl_fp8::gfx950::XKind)2", "e4m3").replace("(XKind)0", "bf16").replace("(XKind)1", "fp16")
    name = name.replace("(XKind)2", "e4m3").replace("XKind::kBF16", "bf16").replace("XKind::kFP16", "fp16")
    name = name.replace("XKind::kE4M3", "e4m3")
    return name


def describe(short):
    """Human description of a kernel instance from its template arguments."""
    m = re.match(r"gfx950_block_scaled_gemm_kernel<(\d), (true|false), (\w+)>", short)
    if m:
        r, e8m0, x = m.groups()
        xdesc = {"bf16": "bf16 x, quantized in-kernel", "fp16": "fp16 x, quantized in-kernel",
                 "e4m3": "e4m3 x + x_scale"}.get(x, x)
        return f"GEMM R={r} {'e8m0' if e8m0 == 'true' else 'fp32'} scales, {xdesc}"
    m = re.match(r"gfx950_per1x128_quant_kernel<(true|false), (true|false)>", short)
    if m:
        return f"per1x128_quant {'fp16' if m.group(1) == 'true' else 'bf16'} -> {'ue8m0' if m.group(2) == 'true' else 'fp32'} scale"
    m = re.match(r"gfx950_rmsnorm_quant_kernel<(true|false), (true|false), (true|false)>", short)
    if m:
        op = "add_rmsnorm_quant" if m.group(3) == "true" else "rmsnorm_quant"
        return f"{op} {'fp16' if m.group(1) == 'true' else 'bf16'} -> {'ue8m0' if m.group(2) == 'true' else 'fp32'} scale"
    return short


def regs_total(meta):
    vgpr = meta.get(".vgpr_count", 0)
    agpr = meta.get(".agpr_count", 0)
    # gfx90a+: AGPRs start at the next multiple of 4 after the VGPRs; allocation granule 8.
    total = (((vgpr + 3) // 4) * 4 + agpr) if agpr else vgpr
    return ((total + 7) // 8) * 8


def waves_per_simd(meta):
    total = max(regs_total(meta), 8)
    return min(8, 512 // total)


# ---- main --------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-install", action="store_true", help="fail instead of installing a missing toolchain")
    ap.add_argument("--report", default=str(ROOT / "docs" / "gfx950_isa.md"), help="report path, or - for stdout")
    ap.add_argument("--keep", help="keep the .s / .o files in this directory")
    args = ap.parse_args()

    missing = toolchain_missing()
    if missing:
        if args.no_install:
            sys.exit(f"[check_gfx950] toolchain missing: {missing}")
        install_toolchain(missing)
        missing = toolchain_missing()
        if missing:
            sys.exit(f"[check_gfx950] toolchain still missing after install: {missing}")
    version = run(zig_clang() + ["--version"]).stdout.split("\n")[0].strip()
    log(version)

    sources = sorted(HIP_DIR.glob("*.hip"))
    if not sources:
        sys.exit("[check_gfx950] no kernels/gfx950/*.hip found")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gfx950_isa_"))
    workdir.mkdir(parents=True, exist_ok=True)

    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 2)) as pool:
        results = list(pool.map(lambda s: compile_one(s, workdir), sources))

    rows = []
    kernel_names = set()
    names_all = {}
    host_symbols = {}
    for src, asm, obj, dev, host in results:
        rel = src.relative_to(ROOT)
        if dev.returncode != 0:
            failures.append(f"{rel}: device compile failed\n{dev.stderr[-4000:]}")
            continue
        if host.returncode != 0:
            failures.append(f"{rel}: host compile failed\n{host.stderr[-4000:]}")
        for line in (dev.stderr + host.stderr).splitlines():
            if "warning:" in line:
                log(f"{rel}: {line.strip()}")
        text = asm.read_text()
        metas = parse_metadata(text)
        names = demangle([m[".name"] for m in metas])
        names_all.update(names)
        for meta in metas:
            mangled = meta[".name"]
            if mangled in kernel_names:
                failures.append(f"kernel {mangled} defined in more than one .hip file")
            kernel_names.add(mangled)
            body = function_body(text, mangled)
            counts = isa_counts(body)
            short = short_name(names[mangled])
            rows.append((rel, short, meta, counts))
        if host.returncode == 0:
            nm = run(["nm", "-C", "--defined-only", "-g", str(obj)])
            for line in nm.stdout.splitlines():
                parts = line.split(" ", 2)
                if len(parts) == 3 and parts[1] in ("T", "D", "B", "R"):
                    sym = parts[2]
                    if sym.startswith("__hip_cuid_"):
                        continue  # per-file unique id emitted by clang for every HIP TU
                    host_symbols.setdefault(sym, []).append(str(rel))

    device_kernels = {short for _, short, _, _ in rows} | {names_all.get(k, k) for k in kernel_names}
    for sym, files in sorted(host_symbols.items()):
        if sym.startswith("__device_stub__") or sym in device_kernels:
            continue  # a non-template kernel's host-side handle/stub: "plus kernels" is allowed
        if sym not in EXPECTED_HOST_SYMBOLS:
            failures.append(f"host symbol {sym} ({', '.join(files)}) is not declared by kernels/common/gpu_launch.h")
        if len(files) > 1:
            failures.append(f"host symbol {sym} defined in {', '.join(files)}")
    missing_syms = EXPECTED_HOST_SYMBOLS - set(host_symbols)
    if missing_syms and not any("host compile failed" in f for f in failures):
        failures.append(f"gpu_launch.h functions not defined by any .hip file: {sorted(missing_syms)}")

    for rel, short, meta, c in rows:
        tag = f"{rel}: {short}"
        is_gemm = "gemm" in short
        if meta.get(".private_segment_fixed_size", 0) > 0 or meta.get(".vgpr_spill_count", 0) > 0 or c["scratch_ops"]:
            failures.append(f"{tag}: uses scratch (private segment {meta.get('.private_segment_fixed_size')} B, "
                            f"{meta.get('.vgpr_spill_count', 0)} VGPR spills, {c['scratch_ops']} scratch ops)")
        if c["calls"]:
            failures.append(f"{tag}: calls a function ({c['calls']} calls)")
        if regs_total(meta) > MAX_REGS_PER_LANE:
            failures.append(f"{tag}: {regs_total(meta)} VGPR+AGPR > {MAX_REGS_PER_LANE} (needs 4 waves/SIMD)")
        if c["rcp"] > c["div_fixup"]:
            failures.append(f"{tag}: {c['rcp']} v_rcp_f32 but only {c['div_fixup']} IEEE division sequences")
        if c["rsq"]:
            failures.append(f"{tag}: uses the approximate v_rsq_f32")
        if is_gemm:
            if c["mfma_scale"] == 0:
                failures.append(f"{tag}: GEMM kernel without v_mfma_scale_f32_16x16x128_f8f6f4")
            if c["nt_x4_loads"] == 0:
                failures.append(f"{tag}: GEMM kernel without non-temporal 16-byte weight loads")
            if meta.get(".max_flat_workgroup_size", 0) < 1024:
                failures.append(f"{tag}: max_flat_workgroup_size {meta.get('.max_flat_workgroup_size')} < 1024")

    report = render_report(version, rows, failures)
    if args.report == "-":
        print(report)
    else:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(report)
        log(f"wrote {Path(args.report).resolve().relative_to(ROOT) if Path(args.report).resolve().is_relative_to(ROOT) else args.report}")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)

    log(f"{len(rows)} kernels from {len(sources)} files")
    if failures:
        for f in failures:
            print(f"[check_gfx950] FAIL {f}", file=sys.stderr)
        sys.exit(1)
    log("OK")


def render_report(version, rows, failures):
    lines = []
    lines.append("# gfx950 ISA report")
    lines.append("")
    lines.append("Generated by `python .ci/check_gfx950.py` from the gfx950 assembly of `kernels/gfx950/*.hip` "
                 "(each file compiled on its own; no AMD GPU involved — these are compile-time facts, not measurements).")
    lines.append("")
    lines.append(f"Compiler: `{version}` (ziglang {ZIGLANG_VERSION}), Debian HIP headers, recipe of SPEC §7 plus the "
                 "wheel's flags from `build_config.hipcc_flags`:")
    lines.append("")
    lines.append("```")
    lines.append(" ".join(["python -m ziglang clang"] + common_flags()[:] + wheel_flags() +
                          ["--cuda-device-only", "-S", "-o", "out.s", "kernels/gfx950/FILE.hip"]).replace(str(ROOT) + "/", "").replace(str(ROOT), "."))
    lines.append("```")
    lines.append("")
    lines.append("Columns: registers per lane (VGPR, AGPR, SGPR); LDS = static group segment (the GEMM's staging and "
                 "reduction area is dynamic: waves x 2528 B, at most 40448 B at 16 waves); scratch = private segment "
                 "(spills); waves/SIMD from VGPR+AGPR (512 per SIMD lane); `mfma_scale` = static count of "
                 "`v_mfma_scale_f32_16x16x128_f8f6f4`; loads = static global/buffer load instructions, of which `nt` "
                 "are the non-temporal 16-byte weight loads; `W B/B` = weight bytes loaded per weight byte the MFMAs "
                 "consume (nt loads x 16 B x 64 lanes / (4 units x 16 rows x 128 K) per stage: 1.00 means every weight "
                 "byte is fetched exactly once); `div` = IEEE division sequences (`v_div_fixup_f32`), `rcp` = "
                 "`v_rcp_f32` (only inside those sequences).")
    lines.append("")
    lines.append("| file | kernel | VGPR | AGPR | SGPR (spilled to VGPR lanes) | LDS B | scratch B | waves/SIMD | mfma_scale | loads (nt) | W B/B | cvt_pk_fp8 | div / rcp | instr |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rel, short, meta, c in rows:
        is_gemm = "gemm" in short
        wbb = f"{c['nt_x4_loads'] * 16 * 64 / (GEMM_UNITS_PER_STAGE * 16 * 128):.2f}" if is_gemm else "-"
        lines.append(
            f"| {rel.name} | {describe(short)} | {meta.get('.vgpr_count', 0)} | {meta.get('.agpr_count', 0)} | "
            f"{meta.get('.sgpr_count', 0)} ({meta.get('.sgpr_spill_count', 0)}) | {meta.get('.group_segment_fixed_size', 0)} | "
            f"{meta.get('.private_segment_fixed_size', 0)} | {waves_per_simd(meta)} | {c['mfma_scale']} | "
            f"{c['vmem_loads']} ({c['nt_x4_loads']}) | {wbb} | {c['cvt_pk_fp8']} | {c['div_fixup']} / {c['rcp']} | "
            f"{c['instructions']} |")
    lines.append("")
    lines.append("Checks (CI fails on any): compile (device and host side) · no scratch / spills / calls in any kernel · "
                 "every GEMM kernel has `v_mfma_scale_f32_16x16x128_f8f6f4` and non-temporal weight loads · VGPR+AGPR "
                 f"<= {MAX_REGS_PER_LANE} (4 waves/SIMD: the GEMM's 16-wave workgroups must launch) · every `v_rcp_f32` "
                 "inside an IEEE division sequence, no `v_rsq_f32` · host objects export exactly the `gpu_launch.h` "
                 "functions, each once.")
    lines.append("")
    lines.append(f"Result: {'FAILED' if failures else 'all checks passed'} ({len(rows)} kernels).")
    for f in failures:
        lines.append(f"- FAIL: {f.splitlines()[0]}")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
