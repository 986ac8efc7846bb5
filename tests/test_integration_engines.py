"""The SGLang and vLLM adapters (sglang_fp8ext/integrations/{sglang,vllm}.py) and docs/integration.md.

* Numerics: each adapter computes SPEC §3.4 within its tolerance against the independent model
  (tests/spec_model.py): fp32 and e8m0 scales, bias, N not a multiple of 128, pre-quantized input,
  3-D input. Block sizes other than 128x128 raise with a message that names them.
* Against the engines' own source: the pinned SGLang and vLLM wheels are downloaded with pip (not
  installed), the relevant .py files are read out of the zip and parsed with ``ast``, and the
  functions/methods the adapters mirror and the engines' call sites are compared with the adapters'
  signatures. The extracted files are cached per version under
  ``$SGL_FP8_ENGINE_CACHE`` or ``$XDG_CACHE_HOME/sglang_fp8ext/engine-src`` (default
  ``~/.cache/...``), outside the repository, so the downloads (SGLang about 39 MB, vLLM about
  336 MB) happen once per machine. Where PyPI cannot be reached these tests SKIP, saying so.
* docs/integration.md: every ```python block preceded by ``<!-- runnable -->`` runs on the CPU.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import urllib.request
import zipfile

import numpy as np
import pytest
import torch

import sglang_fp8ext as fx
from sglang_fp8ext.integrations import sglang as sgl_adapter
from sglang_fp8ext.integrations import vllm as vllm_adapter

from conftest import ACT_NAME, E8M0, FP8, act_bits, rand_act, rand_weight, scale_np, u8
import spec_model as sm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The engine releases the adapters are checked against (bump here, in one place).
ENGINE_PINS = {"sglang": "0.5.23", "vllm": "0.33.0"}

SGLANG_FILES = ("sglang/srt/layers/quantization/fp8_utils.py", "sglang/srt/layers/quantization/fp8.py")
VLLM_FILES = (
    "vllm/model_executor/kernels/linear/scaled_mm/BlockScaledMMLinearKernel.py",
    "vllm/model_executor/kernels/linear/__init__.py",
    "vllm/model_executor/kernels/linear/base.py",
    "vllm/model_executor/layers/quantization/fp8.py",
    "vllm/model_executor/layers/quantization/utils/fp8_utils.py",
)


# ---- the adapters, as one callable each ----------------------------------------------------------

def _vllm_config(weight_group=(128, 128), act_group=(1, 128), out_dtype=torch.bfloat16, static=False, weight_shape=None):
    """A stand-in for vLLM's FP8ScaledMMLinearLayerConfig (the fields the kernel reads)."""
    key = lambda shape, st: types.SimpleNamespace(scale=types.SimpleNamespace(group_shape=shape, static=st))  # noqa: E731
    return types.SimpleNamespace(weight_quant_key=key(weight_group, True), activation_quant_key=key(act_group, static),
                                 out_dtype=out_dtype, input_dtype=out_dtype, weight_shape=weight_shape)


def run_sglang(x, w, ws, xs, bias):
    return sgl_adapter.w8a8_block_fp8_linear(x, w, [128, 128], ws, xs, bias)


def run_vllm_op(x, w, ws, xs, bias):
    return vllm_adapter.Fp8ExtW8A8BlockFp8LinearOp((128, 128), (1, 128)).apply(x, w, ws, xs, bias)


def run_vllm_kernel(x, w, ws, xs, bias):
    if xs is not None:  # vLLM 0.33 hands pre-quantized activations to apply_block_scaled_mm
        kernel = vllm_adapter.Fp8ExtBlockScaledMMKernel(_vllm_config())
        out = kernel.apply_block_scaled_mm(x.reshape(-1, x.shape[-1]), w, xs.reshape(-1, xs.shape[-1]), ws)
        out = out if bias is None else out + bias
        return out.reshape(*x.shape[:-1], w.shape[0])
    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(w, requires_grad=False)
    layer.weight_scale_inv = torch.nn.Parameter(ws, requires_grad=False)
    kernel = vllm_adapter.Fp8ExtBlockScaledMMKernel(_vllm_config(out_dtype=x.dtype))
    kernel.process_weights_after_loading(layer)
    return kernel.apply_weights(layer, x, bias)


ADAPTERS = {"sglang": run_sglang, "vllm_op": run_vllm_op, "vllm_kernel": run_vllm_kernel}


def _weight_scale(N, K, e8m0, seed):
    g = torch.Generator().manual_seed(seed)
    shape = ((N + 127) // 128, K // 128)
    if e8m0:  # a power-of-two checkpoint (DeepSeek-V4 style)
        return fx.scale_to_e8m0(torch.exp2(torch.randint(-10, -4, shape, generator=g).float()))
    return (torch.rand(shape, generator=g) * 3e-3 + 1e-3).float()


def _reference(q_codes, xs_np, ue8m0, w, ws, bias):
    ref = sm.gemm_ref(q_codes, sm.scale_values(xs_np, ue8m0), u8(w), sm.scale_values(scale_np(ws), ws.dtype == E8M0),
                      None if bias is None else bias.float().numpy().astype(np.float64))
    return ref


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
@pytest.mark.parametrize("scale", ["fp32", "e8m0"])
@pytest.mark.parametrize("prequantized", [False, True], ids=["bf16-input", "fp8-input"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("lead", [(5,), (2, 3)], ids=["2d", "3d"])
def test_adapter_matches_spec(adapter, scale, prequantized, with_bias, lead):
    N, K = 208, 384  # N not a multiple of 128: the last scale block is partial
    e8m0 = scale == "e8m0"
    x = rand_act((*lead, K), torch.bfloat16, seed=11)
    w = rand_weight(N, K, seed=3)
    ws = _weight_scale(N, K, e8m0, seed=5)
    bias = (torch.randn(N, generator=torch.Generator().manual_seed(7)) * 0.5).to(torch.bfloat16) if with_bias else None

    x2 = x.reshape(-1, K)
    if prequantized:
        q, xs = fx.per1x128_quant(x, ue8m0=e8m0)  # what rmsnorm_quant / a fused producer hands over
        out = ADAPTERS[adapter](q, w, ws, xs, bias)
        q_codes, xs_np = u8(q.reshape(-1, K)), scale_np(xs.reshape(-1, K // 128))
        assert out.dtype == torch.bfloat16  # SGLang and vLLM emit bf16 for FP8 input
    else:
        out = ADAPTERS[adapter](x, w, ws, None, bias)
        q_codes, xs_np = sm.quant_act_bits(act_bits(x2), ACT_NAME[x.dtype], ue8m0=e8m0)
        assert out.dtype == x.dtype
    assert tuple(out.shape) == (*lead, N)
    ref = _reference(q_codes, xs_np, e8m0, w, ws, bias)
    err = sm.row_rel_err(out.reshape(-1, N).float().numpy(), ref)
    assert err.max() <= 4e-3, (adapter, err.max())


def test_sglang_mixed_scale_formats_and_fp16():
    """SGLang may hand fp32 activation scales to a layer whose scale is e8m0 and the other way round
    (its e8m0 copy lives in weight._mxscale_w_scale); e8m0 -> fp32 is exact, so the result is the
    same GEMM. fp16 input gives fp16 output."""
    N, K = 256, 256
    x = rand_act((4, K), torch.float16, seed=1)
    w = rand_weight(N, K, seed=2)
    ws8 = _weight_scale(N, K, True, seed=3)
    ws32 = fx.e8m0_to_scale(ws8)
    y = sgl_adapter.w8a8_block_fp8_linear(x, w, [128, 128], ws32)
    assert y.dtype == torch.float16
    q, xs = fx.per1x128_quant(x.to(torch.bfloat16), ue8m0=True)
    a = sgl_adapter.w8a8_block_fp8_linear(q, w, [128, 128], ws32, xs)                 # e8m0 x, fp32 w
    b = sgl_adapter.w8a8_block_fp8_linear(q, w, [128, 128], ws8, fx.e8m0_to_scale(xs))  # fp32 x, e8m0 w
    c = sgl_adapter.w8a8_block_fp8_linear(q, w, [128, 128], ws8, xs)                  # e8m0 both
    torch.testing.assert_close(a, c, rtol=0, atol=0)
    torch.testing.assert_close(b, c, rtol=0, atol=0)
    w2 = w.clone()
    w2._mxscale_w_scale = ws8  # SGLang's attribute: bf16 input then takes the e8m0 (ue8m0 quant) path
    torch.testing.assert_close(sgl_adapter.w8a8_block_fp8_linear(x, w2, [128, 128], ws32),
                               fx.fp8_block_linear(x, w, ws8), rtol=0, atol=0)


@pytest.mark.parametrize("block", [[64, 128], [128, 64], [32, 32], [128], None, [128, 128, 1]])
def test_bad_block_sizes_raise(block):
    x = torch.zeros(1, 128, dtype=torch.bfloat16)
    w = torch.zeros(128, 128).to(FP8)
    ws = torch.ones(1, 1)
    with pytest.raises(ValueError, match=r"block_size .* is not supported; only 128x128"):
        sgl_adapter.w8a8_block_fp8_linear(x, w, block, ws)
    with pytest.raises(ValueError, match=r"only 128x128"):
        sgl_adapter.dispatch(block)
    with pytest.raises(ValueError, match=r"weight_group_shape .* is not supported; only 128x128"):
        vllm_adapter.Fp8ExtW8A8BlockFp8LinearOp(block, (1, 128))
    with pytest.raises(ValueError, match=r"weight_group_shape .* is not supported"):
        vllm_adapter.Fp8ExtBlockScaledMMKernel(_vllm_config(weight_group=block))
    ok, reason = vllm_adapter.Fp8ExtBlockScaledMMKernel.can_implement(_vllm_config(weight_group=block))
    assert not ok and "128x128" in reason


def test_vllm_declines_other_activation_groups():
    with pytest.raises(ValueError, match=r"act_quant_group_shape .* only 1x128"):
        vllm_adapter.Fp8ExtW8A8BlockFp8LinearOp((128, 128), (1, 64))
    ok, reason = vllm_adapter.Fp8ExtBlockScaledMMKernel.can_implement(_vllm_config(static=True))
    assert not ok and "dynamic" in reason
    assert vllm_adapter.Fp8ExtBlockScaledMMKernel.can_implement(_vllm_config()) == (True, None)


def test_vllm_declines_weights_the_op_cannot_serve():
    """vLLM hands can_implement the layer's [N, K]; shapes the op would refuse at the first forward
    (K % 128, N % 16) are declined so that vLLM picks its own kernel."""
    for shape in ((4096, 1000), (4104, 4096)):
        ok, reason = vllm_adapter.Fp8ExtBlockScaledMMKernel.can_implement(_vllm_config(weight_shape=torch.Size(shape)))
        assert not ok and f"[{shape[0]}, {shape[1]}]" in reason
    assert vllm_adapter.Fp8ExtBlockScaledMMKernel.can_implement(_vllm_config(weight_shape=(2112, 7168))) == (True, None)


def test_engines_stand_aside_on_gfx94x(monkeypatch):
    """On gfx94x SGLang converts weights to e4m3fnuz, which the ops refuse: dispatch hands those
    layers to SGLang's own kernels (and vLLM's is_supported declines)."""
    monkeypatch.setattr(sgl_adapter, "fnuz_device", lambda: True)
    monkeypatch.setattr(vllm_adapter, "fnuz_device", lambda: True)
    assert sgl_adapter.dispatch([128, 128], fallback=lambda **kw: ("sglang's own", kw)) == (
        "sglang's own", {"weight_block_size": [128, 128], "act_scale_ue8m0": False})
    with pytest.raises(ValueError, match="e4m3fnuz"):
        sgl_adapter.dispatch([128, 128])
    assert vllm_adapter.Fp8ExtBlockScaledMMKernel.is_supported()[0] is False
    monkeypatch.setattr(sgl_adapter, "fnuz_device", lambda: False)
    assert sgl_adapter.dispatch([128, 128], fallback=lambda **kw: None) is sgl_adapter.w8a8_block_fp8_linear


def test_sglang_dispatch_and_install_with_a_stand_in_module(monkeypatch):
    """install() patches the dispatch name fp8.py calls and wraps process_weights_after_loading; a
    stand-in module plays SGLang's part (the real one needs SGLang's GPU dependencies)."""
    calls = []

    def original_dispatch(weight_block_size=None, act_scale_ue8m0=False):
        calls.append(weight_block_size)
        return "sglang's own"

    class Fp8LinearMethod:
        def __init__(self, block):
            self.w8a8_block_fp8_linear = fake.dispatch_w8a8_block_fp8_linear(weight_block_size=block, act_scale_ue8m0=False)

        def process_weights_after_loading(self, layer):
            layer.processed = True

    fake = types.ModuleType("sglang.srt.layers.quantization.fp8")
    fake.dispatch_w8a8_block_fp8_linear = original_dispatch
    fake.Fp8LinearMethod = Fp8LinearMethod
    for name in ("sglang", "sglang.srt", "sglang.srt.layers", "sglang.srt.layers.quantization"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setattr(sys.modules["sglang.srt.layers.quantization"], "fp8", fake, raising=False)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    monkeypatch.delenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", raising=False)

    sgl_adapter.install()
    sgl_adapter.install()  # idempotent
    assert Fp8LinearMethod([128, 128]).w8a8_block_fp8_linear is sgl_adapter.w8a8_block_fp8_linear
    assert Fp8LinearMethod([32, 32]).w8a8_block_fp8_linear == "sglang's own" and calls == [[32, 32]]
    assert Fp8LinearMethod(None).w8a8_block_fp8_linear == "sglang's own"  # per-tensor FP8

    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(rand_weight(256, 256, seed=1), requires_grad=False)
    layer.weight_scale_inv = torch.nn.Parameter(fx.e8m0_to_scale(_weight_scale(256, 256, True, 2)), requires_grad=False)
    Fp8LinearMethod([128, 128]).process_weights_after_loading(layer)
    # the switch is on and the scales are 2^k: an e8m0 copy, under our own name, since SGLang's
    # _mxscale_w_scale would switch its DeepSeek-V4 producers to scales laid out for AITER only
    assert layer.processed and getattr(layer.weight, sgl_adapter.E8M0_ATTR).dtype == E8M0
    assert not hasattr(layer.weight, "_mxscale_w_scale")
    x = rand_act((3, 256), torch.bfloat16, seed=4)
    torch.testing.assert_close(sgl_adapter.w8a8_block_fp8_linear(x, layer.weight, [128, 128], layer.weight_scale_inv),
                               fx.fp8_block_linear(x, layer.weight, getattr(layer.weight, sgl_adapter.E8M0_ATTR)),
                               rtol=0, atol=0)
    assert not getattr(layer.weight, "is_shuffled", False)  # CPU: plain layout

    # A weight update (SGLang's updater) writes checkpoint bytes and scales into the same
    # Parameters and runs process_weights_after_loading again: the preparation follows them, on
    # ROCm (forced here) too, where the markers of the previous shuffle would otherwise stay.
    import sglang_fp8ext.module as fx_module

    monkeypatch.setattr(fx_module, "wants_shuffled_weight", lambda weight: True)
    for seed in (7, 8):
        new_w, new_s = rand_weight(256, 256, seed=seed), fx.e8m0_to_scale(_weight_scale(256, 256, True, seed + 10))
        with torch.no_grad():
            layer.weight.copy_(new_w)
            layer.weight_scale_inv.copy_(new_s)
        Fp8LinearMethod([128, 128]).process_weights_after_loading(layer)
        assert torch.equal(layer.weight.view(torch.uint8), fx.shuffle_weight(new_w).view(torch.uint8)), seed
        assert layer.weight.is_shuffled and layer.aiter_bpreshuffled
        assert torch.equal(getattr(layer.weight, sgl_adapter.E8M0_ATTR).view(torch.uint8),
                           fx.scale_to_e8m0(new_s).view(torch.uint8)), seed


def test_vllm_preparation_follows_a_reload(monkeypatch):
    """vLLM runs process_weights_after_loading after every (re)load: the e8m0 copy follows the scales."""
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    monkeypatch.delenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", raising=False)
    kernel = vllm_adapter.Fp8ExtBlockScaledMMKernel(_vllm_config())
    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(rand_weight(256, 256, seed=1), requires_grad=False)
    layer.weight_scale_inv = torch.nn.Parameter(fx.e8m0_to_scale(_weight_scale(256, 256, True, 2)), requires_grad=False)
    for seed in (3, 4):
        with torch.no_grad():
            layer.weight_scale_inv.copy_(fx.e8m0_to_scale(_weight_scale(256, 256, True, seed)))
        kernel.process_weights_after_loading(layer)
        assert torch.equal(getattr(layer, vllm_adapter.E8M0_ATTR).view(torch.uint8),
                           fx.scale_to_e8m0(layer.weight_scale_inv.detach()).view(torch.uint8)), seed


@pytest.mark.parametrize("keep_plain", [False, True])
def test_sglang_rocm_preparation_simulated_on_cpu(monkeypatch, keep_plain):
    """prepare_layer on ROCm (forced here): the shuffle SGLang's own bpreshuffle would do, recorded
    as SGLang records it (layer.aiter_bpreshuffled: its gathers, CP slicing and model asserts read
    it), and skipped for a layer that keeps its plain layout (DeepSeek-V4's wo_a)."""
    import sglang_fp8ext.module as fx_module

    monkeypatch.setattr(fx_module, "wants_shuffled_weight", lambda weight: True)
    w = rand_weight(256, 256, seed=5)
    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(w.clone(), requires_grad=False)
    layer.weight_scale_inv = torch.nn.Parameter(_weight_scale(256, 256, False, 6), requires_grad=False)
    if keep_plain:
        layer.keep_plain_weight_layout = True
    sgl_adapter.prepare_layer(layer)
    sgl_adapter.prepare_layer(layer)  # idempotent
    expected = w if keep_plain else fx.shuffle_weight(w)
    assert torch.equal(layer.weight.view(torch.uint8), expected.view(torch.uint8))
    assert getattr(layer.weight, "is_shuffled", False) == (not keep_plain)
    assert getattr(layer, "aiter_bpreshuffled", False) == (not keep_plain)
    x = rand_act((3, 256), torch.bfloat16, seed=7)
    torch.testing.assert_close(sgl_adapter.w8a8_block_fp8_linear(x, layer.weight, [128, 128], layer.weight_scale_inv),
                               fx.fp8_block_linear(x, w, layer.weight_scale_inv), rtol=0, atol=0)


def test_vllm_keeps_the_plain_layout_on_rocm(monkeypatch):
    """vLLM code outside the kernel reads layer.weight row-major (MLA dequantizes kv_b_proj), so
    the kernel's preparation never shuffles it, not even where ROCm would prefer the shuffle."""
    import sglang_fp8ext.module as fx_module

    monkeypatch.setattr(fx_module, "wants_shuffled_weight", lambda weight: True)
    w = rand_weight(256, 256, seed=8)
    layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(w.clone(), requires_grad=False)
    layer.weight_scale_inv = torch.nn.Parameter(_weight_scale(256, 256, False, 9), requires_grad=False)
    vllm_adapter.Fp8ExtBlockScaledMMKernel(_vllm_config()).process_weights_after_loading(layer)
    assert torch.equal(layer.weight.view(torch.uint8), w.view(torch.uint8))
    assert not getattr(layer.weight, "is_shuffled", False)


# ---- the engines' own source ---------------------------------------------------------------------

def _cache_root() -> str:
    explicit = os.environ.get("SGL_FP8_ENGINE_CACHE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sglang_fp8ext", "engine-src")


def _pypi_reachable(dist: str) -> str | None:
    """None if PyPI answers, else why not."""
    try:
        with urllib.request.urlopen(f"https://pypi.org/simple/{dist}/", timeout=15) as response:
            response.read(1)
        return None
    except Exception as error:  # noqa: BLE001  (any failure to reach it is the same answer)
        return f"{type(error).__name__}: {error}"


def engine_source(dist: str, files) -> dict:
    """{path: source text} of ``files`` from the pinned wheel of ``dist``; downloaded with pip
    (``--no-deps``, a manylinux x86_64 CPython 3.11 wheel whatever runs the test), read as a zip,
    never installed; cached per version. SKIPs where PyPI cannot be reached."""
    version = ENGINE_PINS[dist]
    cache = os.path.join(_cache_root(), f"{dist}-{version}")
    marker = os.path.join(cache, ".complete")
    if not os.path.isfile(marker):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--only-binary", ":all:",
                   "--python-version", "3.11", "--implementation", "cp",
                   "--platform", "manylinux_2_34_x86_64", "--platform", "manylinux_2_28_x86_64",
                   "--progress-bar", "off", "-d", tmp, f"{dist}=={version}"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
            if proc.returncode != 0 or not wheels:
                unreachable = _pypi_reachable(dist)
                if unreachable is not None:
                    pytest.skip(f"PyPI cannot be reached ({unreachable}): {dist}=={version}'s source not checked")
                raise AssertionError(f"pip could not download {dist}=={version}:\n{proc.stdout}\n{proc.stderr}")
            staging = cache + ".partial"
            shutil.rmtree(staging, ignore_errors=True)
            with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as wheel:
                names = set(wheel.namelist())
                for path in files:
                    assert path in names, f"{dist}=={version}: {path} is not in {wheels[0]}"
                    os.makedirs(os.path.dirname(os.path.join(staging, path)), exist_ok=True)
                    with open(os.path.join(staging, path), "wb") as f:
                        f.write(wheel.read(path))
            with open(os.path.join(staging, ".complete"), "w") as f:
                f.write(wheels[0] + "\n")
            shutil.rmtree(cache, ignore_errors=True)
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            os.replace(staging, cache)
    out = {}
    for path in files:
        with open(os.path.join(cache, path), encoding="utf-8") as f:
            out[path] = f.read()
    return out


@pytest.fixture(scope="module")
def sglang_src():
    return {p: ast.parse(s) for p, s in engine_source("sglang", SGLANG_FILES).items()}


@pytest.fixture(scope="module")
def vllm_src():
    return {p: ast.parse(s) for p, s in engine_source("vllm", VLLM_FILES).items()}


def _top_function(tree, name):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def _class(tree, name):
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _method(cls, name):
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


_NO_DEFAULT = "<required>"


def _ast_params(fn):
    """[(name, kind, default as source text or <required>)] of an ast function, like inspect's."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [_NO_DEFAULT] * (len(positional) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
    out = [(p.arg, "positional", d) for p, d in zip(positional, defaults)]
    if a.vararg:
        out.append((a.vararg.arg, "*args", _NO_DEFAULT))
    out += [(p.arg, "keyword", _NO_DEFAULT if d is None else ast.unparse(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append((a.kwarg.arg, "**kwargs", _NO_DEFAULT))
    return out


def _py_params(fn):
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "positional", inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
             inspect.Parameter.VAR_POSITIONAL: "*args", inspect.Parameter.KEYWORD_ONLY: "keyword",
             inspect.Parameter.VAR_KEYWORD: "**kwargs"}
    return [(p.name, kinds[p.kind], _NO_DEFAULT if p.default is inspect.Parameter.empty else repr(p.default))
            for p in inspect.signature(fn).parameters.values()]


def _calls_to(fn_node, attr_chain):
    """Calls in ``fn_node`` whose callee is the dotted name ``attr_chain`` (e.g. "self.fp8_linear.apply_weights")."""
    return [n for n in ast.walk(fn_node) if isinstance(n, ast.Call) and ast.unparse(n.func) == attr_chain]


def _dict_keys_assigned(fn_node, name):
    """String keys of every dict literal in the value(s) assigned to ``name`` inside ``fn_node``."""
    keys = set()
    for node in ast.walk(fn_node):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Dict):
                    for k in sub.keys:
                        assert isinstance(k, ast.Constant) and isinstance(k.value, str), ast.unparse(node)
                        keys.add(k.value)
    return keys


def _bind_call(call, fn_node, adapter, skip_self=False):
    """Bind an engine call site's arguments (positional count, keyword names, keys of **dicts it
    builds in ``fn_node``) to the adapter's signature: TypeError if the adapter would reject it."""
    sig = inspect.signature(adapter)
    if skip_self:
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    args = [object() for a in call.args]
    assert not any(isinstance(a, ast.Starred) for a in call.args), ast.unparse(call)
    kwargs = {}
    for kw in call.keywords:
        if kw.arg is not None:
            kwargs[kw.arg] = object()
        else:  # **name: the keys of the dict literals the function assigns to it
            assert isinstance(kw.value, ast.Name), ast.unparse(call)
            for key in _dict_keys_assigned(fn_node, kw.value.id):
                kwargs[key] = object()
    sig.bind(*args, **kwargs)
    return sorted(kwargs)


SGLANG_SIX = [("input", "positional", _NO_DEFAULT), ("weight", "positional", _NO_DEFAULT),
              ("block_size", "positional", _NO_DEFAULT), ("weight_scale", "positional", _NO_DEFAULT),
              ("input_scale", "positional", "None"), ("bias", "positional", "None")]


def test_sglang_linear_signature_matches(sglang_src):
    """Every w8a8 block-FP8 linear in SGLang's fp8_utils.py (triton_, aiter_, cutlass_, deepgemm_...,
    the callees dispatch_w8a8_block_fp8_linear picks from) starts with the six parameters of ours,
    same names, order and defaults; what they take beyond those has a default, and ours takes the
    keyword SGLang's call site adds (weight_bf16)."""
    tree = sglang_src["sglang/srt/layers/quantization/fp8_utils.py"]
    ours = _py_params(sgl_adapter.w8a8_block_fp8_linear)
    assert ours[:6] == SGLANG_SIX
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
             and re.fullmatch(r"\w*w8a8_block_fp8_linear\w*", n.name) and not n.name.startswith("dispatch")]
    assert "triton_w8a8_block_fp8_linear" in names and len(names) >= 4, names
    for name in names:
        params = _ast_params(_top_function(tree, name))
        assert params[:6] == SGLANG_SIX, (name, params)
        assert all(d != _NO_DEFAULT for _, kind, d in params[6:] if kind in ("positional", "keyword")), (name, params)
    # the dispatcher install() wraps: dispatch_w8a8_block_fp8_linear(weight_block_size=None, act_scale_ue8m0=False)
    disp = _ast_params(_top_function(tree, "dispatch_w8a8_block_fp8_linear"))
    assert disp == [("weight_block_size", "positional", "None"), ("act_scale_ue8m0", "positional", "False")], disp
    assert _py_params(sgl_adapter.dispatch)[:2] == [("weight_block_size", "positional", "None"),
                                                    ("act_scale_ue8m0", "positional", "False")]


def test_sglang_call_site_matches(sglang_src):
    """Fp8LinearMethod.apply's calls of self.w8a8_block_fp8_linear (bf16 input, and the (q, scale)
    tuple) bind to our signature, **extra_kwargs included; __init__ gets the callee from
    dispatch_w8a8_block_fp8_linear, imported by name from fp8_utils (what install() replaces)."""
    tree = sglang_src["sglang/srt/layers/quantization/fp8.py"]
    method = _class(tree, "Fp8LinearMethod")
    apply = _method(method, "apply")
    calls = _calls_to(apply, "self.w8a8_block_fp8_linear")
    assert len(calls) >= 2, "Fp8LinearMethod.apply no longer calls self.w8a8_block_fp8_linear"
    seen = [tuple(_bind_call(c, apply, sgl_adapter.w8a8_block_fp8_linear)) for c in calls]
    for kw in seen:
        assert {"input", "weight", "block_size", "weight_scale", "input_scale", "bias"} <= set(kw), kw
    assert any(ast.unparse(k.value) == "x[1]" for c in calls for k in c.keywords if k.arg == "input_scale")
    init_calls = _calls_to(_method(method, "__init__"), "dispatch_w8a8_block_fp8_linear")
    assert init_calls, "Fp8LinearMethod.__init__ no longer calls dispatch_w8a8_block_fp8_linear"
    for c in init_calls:
        _bind_call(c, _method(method, "__init__"), sgl_adapter.dispatch)
    imported = {a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "sglang.srt.layers.quantization.fp8_utils"
                for a in n.names}
    assert "dispatch_w8a8_block_fp8_linear" in imported
    assert _method(method, "process_weights_after_loading") is not None


VLLM_KERNEL_METHODS = ("__init__", "is_supported", "can_implement", "process_weights_after_loading",
                       "apply_weights", "apply_block_scaled_mm")


def test_vllm_kernel_signature_matches(vllm_src):
    """Our kernel's methods have exactly the parameters (names, order, defaults, *args/**kwargs) of
    vLLM's Fp8BlockScaledMMLinearKernel / MMLinearKernel methods they override."""
    tree = vllm_src["vllm/model_executor/kernels/linear/scaled_mm/BlockScaledMMLinearKernel.py"]
    base = _class(tree, "Fp8BlockScaledMMLinearKernel")
    root = _class(vllm_src["vllm/model_executor/kernels/linear/base.py"], "MMLinearKernel")
    assert base is not None and root is not None
    assert [ast.unparse(b) for b in base.bases] == ["MMLinearKernel[FP8ScaledMMLinearLayerConfig, FP8BlockParams]", "ABC"]
    ours = vllm_adapter.Fp8ExtBlockScaledMMKernel
    for name in VLLM_KERNEL_METHODS:
        node = _method(base, name) or _method(root, name)  # is_supported is declared on MMLinearKernel
        assert node is not None, f"vLLM's Fp8BlockScaledMMLinearKernel has no {name}"
        engine = _ast_params(node)
        mine = _py_params(getattr(ours, name))
        if engine and engine[0][0] in ("self", "cls"):
            engine = engine[1:]
        if mine and mine[0][0] == "self":
            mine = mine[1:]
        assert mine == engine, (name, mine, engine)
    assert any(isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "apply_input_quant" for n in base.body)


def test_vllm_call_sites_match(vllm_src):
    """Fp8LinearMethod.apply calls self.fp8_linear.apply_weights(layer, x, bias), which binds to ours;
    create_weights registers the block scale as weight_scale_inv (what apply_weights reads) and builds
    self.fp8_linear with init_fp8_linear_kernel, which instantiates kernel_type(config) from
    _POSSIBLE_FP8_BLOCK_KERNELS (the list install() prepends to). vLLM 0.33 has no
    W8A8BlockFp8LinearOp (the older interface of Fp8ExtW8A8BlockFp8LinearOp); if a release brings
    one back, its signature is checked too."""
    tree = vllm_src["vllm/model_executor/layers/quantization/fp8.py"]
    method = _class(tree, "Fp8LinearMethod")
    apply = _method(method, "apply")
    calls = _calls_to(apply, "self.fp8_linear.apply_weights")
    assert calls, "Fp8LinearMethod.apply no longer calls self.fp8_linear.apply_weights"
    for c in calls:
        _bind_call(c, apply, vllm_adapter.Fp8ExtBlockScaledMMKernel.apply_weights, skip_self=True)
    create = _method(method, "create_weights")
    registered = [ast.literal_eval(c.args[0]) for c in _calls_to(create, "layer.register_parameter")
                  if isinstance(c.args[0], ast.Constant)]
    assert "weight_scale_inv" in registered and "weight" in registered, registered
    assert _calls_to(create, "init_fp8_linear_kernel")

    linear = vllm_src["vllm/model_executor/kernels/linear/__init__.py"]
    assigned = {ast.unparse(t) for n in linear.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])}
    assert "_POSSIBLE_FP8_BLOCK_KERNELS" in assigned
    init = _top_function(linear, "init_fp8_linear_kernel")
    # kernel_type(config): the Fp8BlockScaledMMLinearKernel branch (the other, with
    # layer_param_names=, is for FP8ScaledMMLinearKernel subclasses such as Marlin)
    built = [c for c in _calls_to(init, "kernel_type") if len(c.args) == 1 and not c.keywords]
    assert built, "init_fp8_linear_kernel no longer builds kernel_type(config) for block kernels"
    for c in built:
        _bind_call(c, init, vllm_adapter.Fp8ExtBlockScaledMMKernel.__init__, skip_self=True)

    utils = vllm_src["vllm/model_executor/layers/quantization/utils/fp8_utils.py"]
    legacy = _class(utils, "W8A8BlockFp8LinearOp")
    if legacy is None:
        return
    for name in ("__init__", "apply"):  # pragma: no cover  (not in the pinned release)
        engine = [p for p in _ast_params(_method(legacy, name))[1:]]
        mine = _py_params(getattr(vllm_adapter.Fp8ExtW8A8BlockFp8LinearOp, name))[1:]
        assert [(n, k) for n, k, _ in mine] == [(n, k) for n, k, _ in engine], (name, mine, engine)


def test_adapters_import_no_engine():
    code = ("import sys, sglang_fp8ext.integrations.sglang, sglang_fp8ext.integrations.vllm; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sglang', 'vllm')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- docs/integration.md runs --------------------------------------------------------------------

RUNNABLE = re.compile(r"<!-- runnable -->\s*\n```python\n(.*?)\n```", re.S)


def runnable_snippets():
    with open(os.path.join(ROOT, "docs", "integration.md"), encoding="utf-8") as f:
        return RUNNABLE.findall(f.read())


def test_integration_doc_has_runnable_snippets():
    assert len(runnable_snippets()) >= 3


@pytest.mark.parametrize("index", range(len(runnable_snippets())))
def test_integration_doc_snippet_runs(index, monkeypatch):
    for name in ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS", "SGLANG_DSV4_DENSE_MXSCALE",
                 "SGLANG_DSV4_DENSE_MXSCALE_SHAPES"):
        monkeypatch.delenv(name, raising=False)
    code = runnable_snippets()[index]
    exec(compile(code, f"docs/integration.md[runnable {index}]", "exec"), {"__name__": "__doc_snippet__"})
