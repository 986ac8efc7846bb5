"""Package surface (SPEC §1, §5): importable on its own, the op namespace, the Python API."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

import sglang_fp8ext as fx


def _env_for_subprocess():
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(fx.__file__)))
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    return env, pkg_parent


def test_import_alone_in_fresh_interpreter():
    """`import sglang_fp8ext` works as the first import of a process (nothing imported before it)."""
    env, cwd = _env_for_subprocess()
    r = subprocess.run(
        [sys.executable, "-c", "import sglang_fp8ext as fx, torch; print(fx.BUILT_BACKEND); print(torch.ops.sgl_fp8.smallm_gemm)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[0] == fx.BUILT_BACKEND


def _import_copy(tmp_path, library=None):
    """`import sglang_fp8ext` in a fresh interpreter from a copy of the package's Python files (no
    compiled library, or `library`'s bytes as `_C` + the real one's suffix); (returncode, stderr)."""
    src = os.path.dirname(os.path.abspath(fx.__file__))
    dst = tmp_path / "sglang_fp8ext"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_C*", "__pycache__"))
    if library is not None:
        suffix = os.path.basename(fx._C.__file__)[len("_C"):]
        (dst / ("_C" + suffix)).write_bytes(library)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tmp_path)
    # An editable install's finder would resolve sglang_fp8ext._C to the checkout's library even from
    # the copy: take it out of the search so that only the copy is seen.
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path "
            "if '__editable__' not in getattr(f, '__module__', '')]; import sglang_fp8ext")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    return r.returncode, r.stderr


def test_import_without_the_compiled_library_says_so(tmp_path):
    """A source tree that was never built fails to import with a message naming the cause and the
    install command, not Python's "partially initialized module ... circular import"."""
    rc, err = _import_copy(tmp_path)
    assert rc != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("ImportError: sglang_fp8ext: its compiled library is not built"), err[-2000:]
    assert "pip install --no-build-isolation" in last and str(tmp_path) in last


def test_import_with_a_broken_compiled_library_quotes_the_loader(tmp_path):
    """A `_C` that exists but does not load (here: not an ELF file) fails with the loader's own
    message and the installed torch's version."""
    rc, err = _import_copy(tmp_path, library=b"not a shared library")
    assert rc != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("ImportError: sglang_fp8ext: its compiled library did not load ("), err[-2000:]
    assert torch.__version__ in last and "not built" not in last


def test_import_does_not_need_aiter():
    """AITER is optional: the package imports with `aiter` made unimportable."""
    env, cwd = _env_for_subprocess()
    code = (
        "import sys; sys.modules['aiter'] = None\n"
        "import sglang_fp8ext as fx, torch\n"
        "x = torch.randn(2, 256).bfloat16()\n"
        "w = torch.randn(48, 256).to(torch.float8_e4m3fn)\n"
        "print(fx.fp8_block_linear(x, w, torch.ones(1, 2)).shape)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "torch.Size([2, 48])" in r.stdout


def test_api_surface():
    for name in [
        "per1x128_quant",
        "smallm_gemm",
        "scaled_gemm",
        "rmsnorm_quant",
        "add_rmsnorm_quant",
        "fp8_block_linear",
        "shuffle_weight",
        "unshuffle_weight",
        "scale_to_e8m0",
        "e8m0_to_scale",
    ]:
        assert callable(getattr(fx, name)), name
        assert name in fx.__all__
    assert fx.BUILT_BACKEND in ("cpu", "cuda", "rocm")
    for op in ["per1x128_quant", "smallm_gemm", "scaled_gemm", "rmsnorm_quant", "add_rmsnorm_quant"]:
        assert hasattr(torch.ops.sgl_fp8, op)
        # a CPU kernel is registered in every build (CI runs on the CPU)
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"sgl_fp8::{op}", "CPU"), op


@pytest.mark.skipif(not os.environ.get("SGL_FP8_EXPECT_INSTALLED"), reason="only when testing an installed wheel (CI)")
def test_installed_package_is_the_one_under_test():
    """CI's wheel job sets SGL_FP8_EXPECT_INSTALLED: the package must come from site-packages,
    not from the source tree next to the tests."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert not os.path.abspath(fx.__file__).startswith(repo + os.sep), fx.__file__
    assert "site-packages" in fx._C.__file__


def _build_config():
    """The repository's build_config.py (setup.py's helpers; not part of the installed package)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build_config.py")
    spec = importlib.util.spec_from_file_location("build_config_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_source_commit_names_the_checkout_a_build_comes_from(tmp_path):
    """What setup.py records as fx.BUILT_COMMIT: the short hash of the checkout's HEAD, "+dirty"
    while a tracked file differs from it (untracked files do not count), "unknown" for a directory
    that is not the top of a checkout."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the build-info test needs it")
    bc = _build_config()
    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "sub" / "a.txt").write_text("one\n")

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                              capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    head = git("rev-parse", "HEAD")
    commit = bc.source_commit(repo)
    assert len(commit) >= 7 and head.startswith(commit), (commit, head)
    (repo / "untracked.txt").write_text("x\n")
    assert bc.source_commit(repo) == commit
    (repo / "sub" / "a.txt").write_text("two\n")
    assert bc.source_commit(repo) == commit + "+dirty"
    assert bc.source_commit(repo / "sub") == "unknown"  # inside a checkout, not its top
    (tmp_path / "plain").mkdir()
    assert bc.source_commit(tmp_path / "plain") == "unknown"
    (repo / "sglang_fp8ext").mkdir()
    assert bc.write_build_info(repo) == commit + "+dirty"
    namespace = {}
    exec((repo / bc.BUILD_INFO).read_text(), namespace)
    assert namespace["SOURCE_COMMIT"] == commit + "+dirty"


@pytest.mark.skipif(not os.environ.get("SGL_FP8_EXPECT_INSTALLED"), reason="only when testing an installed wheel (CI)")
def test_installed_wheel_names_its_commit():
    """A wheel built by setup.py from a git checkout says which commit (CI also compares it with
    the checkout's HEAD before testing the wheel)."""
    import re
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?", fx.BUILT_COMMIT), fx.BUILT_COMMIT
