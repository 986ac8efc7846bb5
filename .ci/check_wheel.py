"""CI check of a built wheel: `python .ci/check_wheel.py WHEEL [--manylinux]`.

Fails when
  * the wheel is not a CPython abi3 wheel (cp310-abi3-*): the glue uses only CPython's limited API;
  * its library imports a C++ symbol of torch (c10::, at::, torch::, caffe2::) or of pybind11: the
    glue is written against the LibTorch stable ABI, whose entry points are C functions
    (aoti_torch_*, torch_*), so the wheel loads under every torch >= 2.11 of its kind;
  * with --manylinux, its platform tag is not a manylinux tag (auditwheel repair gives one).
Prints the tag, the size and what the library needs (NEEDED entries).
"""

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

FORBIDDEN = re.compile(r"\b(?:c10|at|torch|caffe2|pybind11)::")


def log(msg):
    print(f"[check_wheel] {msg}", flush=True)


def main(argv):
    wheel = Path(argv[0])
    want_manylinux = "--manylinux" in argv
    failures = []
    tags = wheel.name[: -len(".whl")].split("-")[-3:]
    log(f"{wheel.name}: {wheel.stat().st_size / 1e6:.2f} MB, tags {'-'.join(tags)}")
    if tags[:2] != ["cp310", "abi3"]:
        failures.append(f"not an abi3 wheel for CPython >= 3.10: {'-'.join(tags)}")
    if want_manylinux and not tags[2].startswith("manylinux"):
        failures.append(f"platform tag {tags[2]} is not a manylinux tag")
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as z:
            libs = [n for n in z.namelist() if re.fullmatch(r"sglang_fp8ext/_C\..*so", n)]
            if len(libs) != 1:
                log(f"FAIL: expected one sglang_fp8ext/_C.*.so in the wheel, found {libs}")
                return 1
            lib = z.extract(libs[0], tmp)
        log(f"library {libs[0]}")
        undefined = subprocess.run(["nm", "-D", "--undefined-only", "-C", lib], capture_output=True, text=True,
                                   check=True).stdout.splitlines()
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                            subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout)
    log(f"NEEDED: {', '.join(needed)}")
    cxx_torch = [line.split(None, 1)[-1] for line in undefined if FORBIDDEN.search(line)]
    shim = [line.split()[-1] for line in undefined if re.search(r"\b(?:aoti_torch|torch)_\w+$", line)]
    log(f"{len(undefined)} undefined symbols, {len(shim)} of them stable C shim functions, "
        f"{len(cxx_torch)} C++ torch symbols")
    if cxx_torch:
        failures.append(f"imports {len(cxx_torch)} C++ torch symbols, e.g. {cxx_torch[:5]}")
    if not shim:
        failures.append("imports no stable shim function: not the library this check expects")
    for f in failures:
        log("FAIL: " + f)
    log("OK" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
