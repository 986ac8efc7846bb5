"""transformers' fine-grained FP8 models on sglang_fp8ext (sglang_fp8ext.integrations.transformers).

What is held, on the CPU (CI):

* transformers' own ``FP8Linear`` modules, filled with checkpoint-shaped tensors (random e4m3
  weights, random positive fp32 scales or e8m0 scales, N = 272 and 2112 (not multiples of 128),
  bias or none, 2-D and 3-D input) and converted by ``use_sglang_fp8ext``, agree with a reference
  written here from tests/spec_model.py: the weight dequantized per 128x128 block in float64, the
  activations quantized per SPEC §3.1 (fp32 scales) / §3.2 (ue8m0 scales), a float64 matmul;
  bound SPEC §3.4 (per-row relative error <= 4e-3).
* Weight preparation is Fp8BlockLinear's (the e8m0 switches, the ROCm shuffle simulated), the
  parameter names and formats survive state_dict, load_state_dict and ``model.to(dtype)``,
  ineligible FP8 modules are left alone with a reason, a second call changes nothing, a model
  without FP8Linear is untouched, and an accelerate hook keeps working.
* A small Qwen3 model (2 layers, hidden 256, intermediate 512, vocabulary 512, q/k/v/o biases,
  random seeded weights with per-block magnitudes) is written as an FP8 checkpoint the way real
  ones are laid out (safetensors: each projection's ``weight`` e4m3 + ``weight_scale_inv`` fp32,
  everything else bf16; config.json with quantization_config {quant_method "fp8",
  activation_scheme "dynamic", weight_block_size [128, 128]}), quantized here per block with
  scale = amax / 448. transformers' from_pretrained (local files only) + ``load_fp8_model`` loads
  it as FP8 (plain from_pretrained on a machine without CUDA dequantizes it to bf16: checked too),
  and ``generate()`` with a static cache (``cache_implementation="static"``) runs through this
  package: deterministic (two runs: identical tokens, bitwise identical logits), logits close to
  the bf16 model: cosine > 0.99 at the first generated step (measured 0.996, 0.994) and,
  teacher-forced on the bf16 model's tokens, median over all positions > 0.99 (0.994) with every
  position >= 0.98 (min 0.987; the last step 0.990, test_e2e_decode's bound: see FP8_MIN_COS), and under ``torch.compile(fullgraph=True)`` through
  transformers' own compile path (``CompileConfig``; backend "aot_eager" on the CPU: it traces the
  whole model in one graph, so a graph break fails the test, without inductor's C++ build, which
  takes ~18 s on 2 cores) with the same tokens as eager.
* tools/transformers_fp8_generate.py: argument checks and a CPU smoke run (2 steps, small model;
  its timing part is GPU-only).

On a GPU (skipped here with the reason): the same FP8Linear checks on cuda; the checkpoint model
on cuda with one decode step captured as a CUDA graph (bitwise equal to eager) and generate()'s
default compile path (inductor, reduce-overhead: same tokens as eager).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types

import numpy as np
import pytest
import torch
from torch import nn

import spec_model as sm
from conftest import E8M0, FP8, act_bits, assert_gemm_contract, rand_act, rand_weight, rand_wscale, u8

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate", reason="transformers' FP8 loading requires accelerate (pip install accelerate)")

import qwen3_decode as qd  # noqa: E402
import sglang_fp8ext as fx  # noqa: E402
from sglang_fp8ext.integrations import transformers as tfx  # noqa: E402
from sglang_fp8ext.module import BlockFp8WeightPreparation  # noqa: E402
from transformers.integrations.finegrained_fp8 import FP8Linear  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWITCHES = ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS", "SGLANG_DSV4_DENSE_MXSCALE", "SGLANG_DSV4_DENSE_MXSCALE_SHAPES")
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@pytest.fixture(autouse=True)
def _clean_switches(monkeypatch):
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)


# ---- FP8Linear modules against the SPEC reference -------------------------------------------------


def make_fp8linear(N, K, *, e8m0=False, bias=False, seed=0, block=(128, 128), scheme="dynamic") -> FP8Linear:
    """transformers' FP8Linear holding checkpoint-shaped tensors (as from_pretrained leaves it)."""
    with torch.device("meta"):
        m = FP8Linear(K, N, block_size=block, activation_scheme=scheme, scale_fmt="ue8m0" if e8m0 else "float", has_bias=bias)
    m.weight = nn.Parameter(rand_weight(N, K, seed).clone(), requires_grad=False)
    if block == (128, 128):
        m.weight_scale_inv = nn.Parameter(rand_wscale(N, K, e8m0, seed).clone(), requires_grad=False)
    elif block is None:
        m.weight_scale_inv = nn.Parameter(torch.tensor(0.01), requires_grad=False)
    else:
        shape = (-(-N // block[0]), -(-K // block[1]))
        m.weight_scale_inv = nn.Parameter(torch.full(shape, 0.01), requires_grad=False)
    if scheme == "static":
        m.activation_scale = nn.Parameter(torch.tensor(0.05), requires_grad=False)
    if bias:
        g = torch.Generator().manual_seed(seed + 5)
        # bf16-representable values in transformers' fp32 bias parameter
        m.bias = nn.Parameter(torch.randn(N, generator=g).to(torch.bfloat16).float() * 4, requires_grad=False)
    return m.eval()


def spec_reference(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, bias) -> np.ndarray:
    """float64: quantize x per SPEC §3.1/§3.2 (spec_model), dequantize the weight per 128x128 block,
    multiply; [rows, N] with rows = x's leading dims flattened."""
    ue8m0 = scale.dtype == E8M0
    K = x.shape[-1]
    N = weight.shape[0]
    bits = act_bits(x).reshape(-1, K)
    q, xs = sm.quant_act_bits(bits, "bf16" if x.dtype == torch.bfloat16 else "fp16", ue8m0)
    xd = sm.dequant(q, xs, ue8m0)  # [rows, K] float64
    sv = sm.scale_values(u8(scale) if ue8m0 else scale.detach().cpu().numpy(), ue8m0)  # [NB, KB]
    wscale = np.repeat(np.repeat(sv, 128, axis=0)[:N], 128, axis=1)[:, :K]
    wd = sm.e4m3_decode(u8(weight)) * wscale  # [N, K] float64
    ref = xd @ wd.T
    if bias is not None:
        ref = ref + bias.detach().cpu().double().numpy()[None, :]
    return ref


CASES = [
    # (N, K, e8m0, bias, input shape without K)
    (272, 256, False, False, (5,)),
    (272, 256, False, True, (2, 3)),
    (272, 256, True, False, (2, 3)),
    (272, 256, True, True, (7,)),
    (2112, 384, False, True, (1,)),
    (2112, 384, True, False, (3, 1)),
]


@pytest.mark.parametrize("N,K,e8m0,bias,lead", CASES, ids=[f"N{c[0]}-K{c[1]}-{'e8m0' if c[2] else 'fp32'}-{'bias' if c[3] else 'nobias'}-{len(c[4]) + 1}d" for c in CASES])
def test_fp8linear_matches_spec_reference(device, N, K, e8m0, bias, lead):
    m = make_fp8linear(N, K, e8m0=e8m0, bias=bias).to(device)
    report = tfx.use_sglang_fp8ext(m)
    assert report.converted == [""] and not report.skipped
    assert type(m) is tfx.Fp8ExtLinear and isinstance(m, FP8Linear)
    assert m.weight_scale_inv.dtype == (E8M0 if e8m0 else torch.float32)
    x = rand_act((*lead, K), torch.bfloat16, seed=N + K).to(device)
    with torch.no_grad():
        out = m(x)
    assert out.shape == (*lead, N) and out.dtype == torch.bfloat16
    ref = spec_reference(x, m.weight, m.weight_scale_inv, m.bias)
    assert_gemm_contract(out.reshape(-1, N), ref, f"converted FP8Linear N={N} K={K} e8m0={e8m0} bias={bias} x{tuple(x.shape)}")
    # the module is exactly a plain fp8_block_linear call
    expected = fx.fp8_block_linear(x, m.weight, m.weight_scale_inv, bias=None if m.bias is None else m.bias.to(torch.bfloat16))
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16))


def test_fp16_activations(device):
    m = make_fp8linear(272, 256, bias=True).to(device)
    tfx.use_sglang_fp8ext(m)
    x = rand_act((4, 256), torch.float16, seed=3).to(device)
    out = m(x)
    assert out.dtype == torch.float16
    assert_gemm_contract(out, spec_reference(x, m.weight, m.weight_scale_inv, m.bias), "fp16 input")


# ---- weight preparation: the same code as Fp8BlockLinear -------------------------------------------


def pow2_fp32_scales(N, K, seed=0):
    return fx.e8m0_to_scale(rand_wscale(N, K, True, seed))


def test_mxscale_switch_makes_an_e8m0_copy(monkeypatch):
    """SGLANG_DSV4_DENSE_MXSCALE=1 with power-of-two fp32 scales: an e8m0 copy is made and used
    (activations then get ue8m0 scales, SPEC §3.2); not part of state_dict. _SHAPES restricts it."""
    N, K = 272, 256
    x = rand_act((3, K), torch.bfloat16, seed=11)
    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    m = make_fp8linear(N, K)
    m.weight_scale_inv.data = pow2_fp32_scales(N, K)
    tfx.use_sglang_fp8ext(m)
    assert m.weight_scale_e8m0 is not None and m.weight_scale_e8m0.dtype == E8M0
    assert m.weight_scale_inv.dtype == torch.float32  # kept, as Fp8BlockLinear keeps it
    assert "weight_scale_e8m0" not in m.state_dict()
    out = m(x)
    assert_gemm_contract(out, spec_reference(x, m.weight, m.weight_scale_e8m0, None), "e8m0 copy")
    # the module's preparation equals Fp8BlockLinear's on the same tensors
    ref_mod = fx.Fp8BlockLinear(K, N)
    ref_mod.load_state_dict({"weight": m.weight, "weight_scale_inv": m.weight_scale_inv})
    ref_mod.process_weights_after_loading()
    assert np.array_equal(u8(ref_mod.weight_scale_e8m0), u8(m.weight_scale_e8m0))
    assert torch.equal(ref_mod(x).view(torch.int16), out.view(torch.int16))

    monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES", "4096x1024")
    other = make_fp8linear(N, K)
    other.weight_scale_inv.data = pow2_fp32_scales(N, K)
    tfx.use_sglang_fp8ext(other)
    assert other.weight_scale_e8m0 is None  # (272, 256) is not in the list

    monkeypatch.delenv("SGLANG_DSV4_DENSE_MXSCALE_SHAPES")
    not_pow2 = make_fp8linear(N, K)  # random fp32 scales: they stay fp32
    tfx.use_sglang_fp8ext(not_pow2)
    assert not_pow2.weight_scale_e8m0 is None


def test_rocm_shuffle_preparation(monkeypatch):
    """On ROCm the weight is AITER-shuffled (simulated on the CPU, as test_module does for
    Fp8BlockLinear): same output, and state_dict still exports the plain checkpoint layout."""
    monkeypatch.setattr(BlockFp8WeightPreparation, "_should_shuffle", lambda self: True)
    N, K = 272, 256
    plain = make_fp8linear(N, K, bias=True)
    codes = u8(plain.weight).copy()
    x = rand_act((2, K), torch.bfloat16, seed=2)
    expected = fx.fp8_block_linear(x, plain.weight, plain.weight_scale_inv, bias=plain.bias.to(torch.bfloat16))
    tfx.use_sglang_fp8ext(plain)
    assert plain.is_shuffled and plain.weight.is_shuffled
    assert not np.array_equal(u8(plain.weight), codes)
    assert torch.equal(plain(x).view(torch.int16), expected.view(torch.int16))
    sd = plain.state_dict()
    assert np.array_equal(u8(sd["weight"]), codes)
    plain.load_state_dict(sd)  # back to the checkpoint state, then prepared again
    assert not plain.is_shuffled and np.array_equal(u8(plain.weight), codes)
    plain.process_weights_after_loading()
    assert plain.is_shuffled and torch.equal(plain(x).view(torch.int16), expected.view(torch.int16))


def test_state_dict_names_and_model_to_dtype():
    m = nn.Sequential(make_fp8linear(272, 256, bias=True), nn.ReLU(), make_fp8linear(128, 256, e8m0=True))
    before = {k: v.clone() for k, v in m.state_dict().items()}
    tfx.use_sglang_fp8ext(m)
    after = m.state_dict()
    assert list(after) == list(before)
    assert set(after) == {"0.weight", "0.weight_scale_inv", "0.bias", "2.weight", "2.weight_scale_inv"}
    for k in before:
        assert after[k].dtype == before[k].dtype and torch.equal(after[k].view(torch.uint8), before[k].view(torch.uint8)), k
    # a fresh converted module loads the checkpoint names
    fresh = nn.Sequential(make_fp8linear(272, 256, bias=True, seed=9), nn.ReLU(), make_fp8linear(128, 256, e8m0=True, seed=9))
    tfx.use_sglang_fp8ext(fresh)
    fresh.load_state_dict(before)
    x = rand_act((3, 256), torch.bfloat16, seed=4)
    assert torch.equal(fresh[0](x).view(torch.int16), m[0](x).view(torch.int16))
    # .to(dtype) keeps the FP8 weight and its scales (an nn.Module cast would make them half)
    m.to(torch.float16)
    assert m[0].weight.dtype == FP8 and m[0].weight_scale_inv.dtype == torch.float32 and m[2].weight_scale_inv.dtype == E8M0
    assert m[0].bias.dtype == torch.float16
    out = m[0](x.half())
    assert out.dtype == torch.float16
    assert_gemm_contract(out, spec_reference(x.half(), m[0].weight, m[0].weight_scale_inv, m[0].bias), "after .to(fp16)")


def test_skipped_modules_report_and_idempotence():
    mods = nn.ModuleDict({
        "good": make_fp8linear(272, 256, bias=True),
        "good_e8m0": make_fp8linear(128, 256, e8m0=True),
        "block64": make_fp8linear(128, 256, block=(64, 64)),
        "static": make_fp8linear(128, 256, scheme="static"),
        "per_tensor": make_fp8linear(128, 256, block=None),
        "odd_k": make_fp8linear(128, 192),
        "odd_n": make_fp8linear(136, 256),
        "plain": nn.Linear(256, 128),
    })
    with torch.no_grad():
        unquantized = make_fp8linear(128, 256)
        unquantized.weight = nn.Parameter(torch.randn(128, 256, dtype=torch.bfloat16), requires_grad=False)
    mods["bf16_weight"] = unquantized
    classes = {k: type(v) for k, v in mods.items()}
    report = tfx.use_sglang_fp8ext(mods)
    assert report.converted == ["good", "good_e8m0"] and report.already_converted == [] and report.changed
    assert set(report.skipped) == {"block64", "static", "per_tensor", "odd_k", "odd_n", "bf16_weight"}
    assert "128x128" in report.skipped["block64"] and "(64, 64)" in report.skipped["block64"]
    assert "static" in report.skipped["static"]
    assert "per-tensor" in report.skipped["per_tensor"]
    assert "K = 192" in report.skipped["odd_k"]
    assert "N = 136" in report.skipped["odd_n"]
    assert "bfloat16" in report.skipped["bf16_weight"]
    for k, cls in classes.items():
        if k.startswith("good"):
            assert type(mods[k]) is tfx.Fp8ExtLinear
        else:
            assert type(mods[k]) is cls, k  # left exactly as it was
    assert "2 FP8Linear converted" in str(report) and "skipped block64" in str(report)

    ptrs = {k: v.data_ptr() for k, v in mods.state_dict().items()}
    again = tfx.use_sglang_fp8ext(mods)
    assert again.converted == [] and again.already_converted == ["good", "good_e8m0"] and not again.changed
    assert again.skipped == report.skipped
    assert "already converted" in again.summary()
    assert {k: v.data_ptr() for k, v in mods.state_dict().items()} == ptrs


def test_accelerate_hook_keeps_working():
    """A module carrying an accelerate hook (device_map dispatch/offload wraps forward on the
    instance) runs our forward through the hook."""
    from accelerate.hooks import ModelHook, add_hook_to_module

    calls = []

    class Count(ModelHook):
        def pre_forward(self, module, *args, **kwargs):
            calls.append(1)
            return args, kwargs

    m = make_fp8linear(272, 256)
    add_hook_to_module(m, Count())
    assert tfx.use_sglang_fp8ext(m).converted == [""]
    x = rand_act((2, 256), torch.bfloat16, seed=8)
    out = m(x)  # transformers' own forward would raise here (no FP8 kernel on the CPU)
    assert calls == [1]
    assert_gemm_contract(out, spec_reference(x, m.weight, m.weight_scale_inv, None), "through an accelerate hook")


def test_model_without_fp8linear_is_untouched():
    model = qd.build_qwen3(qd.SMALL, seed=3, block_spread=0.0)
    params = {k: (p, p.detach().clone()) for k, p in model.named_parameters()}
    types_before = {n: type(m) for n, m in model.named_modules()}
    report = tfx.use_sglang_fp8ext(model)
    assert report == tfx.Fp8ExtReport() and not report.changed
    assert "nothing to do" in report.summary()
    assert {n: type(m) for n, m in model.named_modules()} == types_before
    for k, p in model.named_parameters():
        assert p is params[k][0] and torch.equal(p, params[k][1]), k


def test_weights_on_other_devices_are_skipped():
    """transformers also runs FP8 on XPU; the ops have CPU and CUDA/ROCm kernels only, so such a
    layer stays on transformers' path (with the reason) instead of failing at its first forward."""
    mod = make_fp8linear(128, 256)
    real = mod.weight
    mod._parameters["weight"] = types.SimpleNamespace(device=torch.device("xpu"), dtype=real.dtype, shape=real.shape)
    reason = tfx._skip_reason(mod)
    assert reason is not None and "xpu" in reason and "CPU and CUDA" in reason


# ---- an FP8 checkpoint through from_pretrained, generate, compile ---------------------------------

PROMPT = torch.randint(0, qd.SMALL["vocab_size"], (2, 6), generator=torch.Generator().manual_seed(7))
NEW_TOKENS = 4
# FP8 against bf16 logits, per position: tests/test_e2e_decode.py's bound and its reasoning (e4m3
# rounds weights and activations by up to 2^-4; 14 projections compound to ~10 % relative error at
# the logits of a random-weight model). Measured here: cosine 0.986-0.996, median ~0.993; the
# last teacher-forced step ~0.990 (0.9896, 0.9899 for the two rows).
FP8_MIN_COS = 0.98


def quantize_blocks(w: torch.Tensor):
    """This test's own block quantization: per 128x128 block, scale = amax / 448 (fp32),
    q = e4m3(w / scale) (torch's round-to-nearest-even cast, after a clamp to +-448)."""
    N, K = w.shape
    NB = -(-N // 128)
    wf = torch.zeros(NB * 128, K, dtype=torch.float32)
    wf[:N] = w.float()
    blocks = wf.view(NB, 128, K // 128, 128)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    q = (blocks / scale[:, None, :, None]).clamp(-448, 448).to(FP8).view(NB * 128, K)[:N].contiguous()
    return q, scale.contiguous()


def build_bf16_model():
    config = transformers.Qwen3Config(**qd.SMALL, attention_bias=True, tie_word_embeddings=True,
                                      max_position_embeddings=256, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config).to(torch.bfloat16).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, nn.Linear) and name != "lm_head":
                N, K = mod.weight.shape
                # one magnitude per 128x128 block (real checkpoints' scales differ block to block)
                z = torch.exp(torch.randn(-(-N // 128), K // 128, generator=g))
                mod.weight.mul_(z.repeat_interleave(128, 0)[:N].repeat_interleave(128, 1).to(torch.bfloat16))
                if mod.bias is not None:
                    mod.bias.copy_(torch.randn(N, generator=g) * 0.02)
    return model


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """(FP8 checkpoint dir, bf16 checkpoint dir, bf16 model, {projection weight key: (q, scale)})."""
    from safetensors.torch import save_file

    model = build_bf16_model()
    root = tmp_path_factory.mktemp("qwen3_fp8")
    bf16_dir, fp8_dir = root / "bf16", root / "fp8"
    model.save_pretrained(bf16_dir)
    tensors, quantized = {}, {}
    for key, t in model.state_dict().items():
        if key == "lm_head.weight":
            continue  # tied to the embedding, as save_pretrained writes it
        if key.endswith("proj.weight"):
            q, s = quantize_blocks(t)
            tensors[key], tensors[key[: -len("weight")] + "weight_scale_inv"] = q, s
            quantized[key] = (q, s)
        else:
            tensors[key] = t.contiguous()
    fp8_dir.mkdir()
    save_file(tensors, str(fp8_dir / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(fp8_dir)
    cfg = json.loads((fp8_dir / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    (fp8_dir / "config.json").write_text(json.dumps(cfg, indent=2))
    return fp8_dir, bf16_dir, model, quantized


def load(checkpoint, **kwargs):
    return tfx.load_fp8_model(checkpoint[0], local_files_only=True, dtype=torch.bfloat16, **kwargs)


def greedy(model, **kwargs):
    with torch.no_grad():
        out = model.generate(PROMPT.to(model.device), max_new_tokens=NEW_TOKENS, do_sample=False, cache_implementation="static",
                             output_logits=True, return_dict_in_generate=True, pad_token_id=0, **kwargs)
    return out.sequences[:, PROMPT.shape[1]:].cpu(), torch.stack(out.logits).float().cpu()


def cosine(a, b):
    return torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=-1)


def test_plain_from_pretrained_dequantizes_without_cuda(checkpoint):
    """The problem load_fp8_model solves: without CUDA, transformers turns the FP8 checkpoint into a
    bf16 model (no FP8Linear at all)."""
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: transformers keeps FP8 there by itself")
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint[0], local_files_only=True, dtype=torch.bfloat16)
    assert not any(isinstance(m, FP8Linear) for m in model.modules())
    assert model.model.layers[0].mlp.up_proj.weight.dtype == torch.bfloat16


def test_load_fp8_checkpoint(checkpoint):
    model = load(checkpoint)
    layers = model.config.num_hidden_layers
    names = [f"model.layers.{i}.{'self_attn' if p[0] in 'qkvo' else 'mlp'}.{p}" for i in range(layers) for p in PROJECTIONS]
    report = tfx.use_sglang_fp8ext(model)  # load_fp8_model converted already: the report says so
    assert report.converted == [] and sorted(report.already_converted) == sorted(names) and not report.skipped
    sd = model.state_dict()
    for key, (q, s) in checkpoint[3].items():
        assert sd[key].dtype == FP8 and torch.equal(sd[key].view(torch.uint8), q.view(torch.uint8)), key
        assert torch.equal(sd[key[: -len("weight")] + "weight_scale_inv"], s), key
    attn = model.model.layers[0].self_attn
    assert type(attn.q_proj) is tfx.Fp8ExtLinear and attn.q_proj.bias is not None
    assert model.lm_head.weight.dtype == torch.bfloat16  # tied embedding, never quantized
    assert not model.hf_quantizer.quantization_config.dequantize
    # the context alone: transformers' own FP8Linear modules, FP8 weights, nothing converted
    with tfx.keep_fp8_on_cpu() as record:
        plain = transformers.AutoModelForCausalLM.from_pretrained(checkpoint[0], local_files_only=True, dtype=torch.bfloat16)
    assert len(record.quantizers) == 1 and record.kept_fp8 == (not torch.cuda.is_available())
    assert type(plain.model.layers[0].mlp.up_proj) is FP8Linear and plain.model.layers[0].mlp.up_proj.weight.dtype == FP8


def test_generate_static_cache_close_to_bf16_and_deterministic(checkpoint):
    model = load(checkpoint)
    tokens, logits = greedy(model)
    tokens2, logits2 = greedy(model)
    assert torch.equal(tokens, tokens2) and torch.equal(logits, logits2), "two runs of the converted model differ"
    assert torch.isfinite(logits).all()

    bf16 = checkpoint[2]
    ref_tokens, ref_logits = greedy(bf16)
    first = cosine(logits[0], ref_logits[0])  # the first generated position: same context
    # every position up to the last step, teacher-forced on the bf16 model's sequence (equal contexts)
    seq = torch.cat([PROMPT, ref_tokens[:, :-1]], dim=1)
    with torch.no_grad():
        every = cosine(model(seq).logits.float(), bf16(seq).logits.float())  # [batch, positions]
    last = every[:, -1]
    print(f"\nFP8 vs bf16 logits cosine: first generated step {first.tolist()}, last step (teacher-forced) "
          f"{last.tolist()}, all positions min {every.min().item():.4f} median {every.median().item():.4f}; "
          f"greedy tokens equal: {(tokens == ref_tokens).float().mean().item():.2f}")
    assert first.min() > 0.99
    assert every.median() > 0.99
    assert every.min() >= FP8_MIN_COS


def test_generate_under_torch_compile_fullgraph(checkpoint):
    """transformers' own compile path (generate + CompileConfig) with fullgraph=True: a graph break
    anywhere in the model, our forward included, raises. CPU: backend aot_eager (see the module
    docstring); the tokens equal eager's."""
    model = load(checkpoint)
    eager_tokens, eager_logits = greedy(model)
    config = transformers.CompileConfig(backend="aot_eager", fullgraph=True, mode=None)
    config._compile_all_devices = True  # transformers compiles on accelerators only unless told
    counters = torch._dynamo.utils.counters
    counters.clear()
    tokens, logits = greedy(model, compile_config=config)
    assert counters["stats"]["unique_graphs"] >= 1, "generate() did not compile the forward"
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert torch.equal(tokens, eager_tokens)
    assert (cosine(logits, eager_logits) > 0.999).all()


def test_load_fp8_model_rejects_a_bf16_checkpoint(checkpoint):
    with pytest.raises(ValueError, match="not a fine-grained FP8 checkpoint"):
        tfx.load_fp8_model(checkpoint[1], local_files_only=True)


def test_keep_fp8_on_cpu_fails_loudly_when_transformers_changes(checkpoint, monkeypatch):
    from transformers.quantizers import auto, quantizer_finegrained_fp8

    monkeypatch.setitem(auto.AUTO_QUANTIZER_MAPPING, "fp8", object)
    with pytest.raises(RuntimeError, match="no longer maps"):
        with tfx.keep_fp8_on_cpu():
            pass
    monkeypatch.undo()

    # not an FP8 checkpoint: transformers never validates its FP8 quantizer
    with tfx.keep_fp8_on_cpu() as record:
        transformers.AutoModelForCausalLM.from_pretrained(checkpoint[1], local_files_only=True)
    assert record.quantizers == [] and not record.kept_fp8

    # a transformers that dequantizes somewhere else than validate_environment: caught after loading
    cls = quantizer_finegrained_fp8.FineGrainedFP8HfQuantizer
    original_init = cls.__init__

    def init(self, quantization_config, **kwargs):
        original_init(self, quantization_config, **kwargs)
        self.quantization_config.dequantize = True

    monkeypatch.setattr(cls, "__init__", init)
    with pytest.raises(RuntimeError, match="dequantized.*below compute capability 8.9"):
        load(checkpoint)
    monkeypatch.undo()
    # the context restores the class
    assert "keep_fp8_on_cpu" not in cls.validate_environment.__qualname__


# ---- GPU: CUDA graph and inductor ------------------------------------------------------------------


def test_checkpoint_on_gpu_cuda_graph_and_compile(gpu, checkpoint, monkeypatch):
    # inductor rounds fused bf16 intermediates like eager only with this (tests/qwen3_decode.py)
    monkeypatch.setattr("torch._inductor.config.emulate_precision_casts", True)
    model = load(checkpoint, device_map="cuda")
    assert type(model.model.layers[0].mlp.up_proj) is tfx.Fp8ExtLinear
    eager_tokens, eager_logits = greedy(model, disable_compile=True)
    ref_tokens, ref_logits = greedy(checkpoint[2].to("cuda"), disable_compile=True)
    checkpoint[2].to("cpu")
    assert cosine(eager_logits[0], ref_logits[0]).min() > 0.99
    # one decode step captured as a CUDA graph: bitwise equal to eager
    prompt = PROMPT.cuda()
    eager = qd.Decoder(model, prompt.shape[0], 32, "eager")
    graph = qd.Decoder(model, prompt.shape[0], 32, "graph")
    a = qd.teacher_forced_logits(eager, prompt, eager_tokens.cuda())
    b = qd.teacher_forced_logits(graph, prompt, eager_tokens.cuda())
    assert torch.equal(a, b)
    # transformers' default compile path for a static cache on CUDA (inductor, reduce-overhead)
    tokens, _ = greedy(model)
    assert torch.equal(tokens, eager_tokens)


# ---- tools/transformers_fp8_generate.py ----------------------------------------------------------


def load_tool():
    path = os.path.join(REPO, "tools", "transformers_fp8_generate.py")
    spec = importlib.util.spec_from_file_location("transformers_fp8_generate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["transformers_fp8_generate"] = module
    spec.loader.exec_module(module)
    return module


def test_tool_arguments():
    tool = load_tool()
    args = tool.parse_args([])
    assert args.config == "bench" and args.device == "cuda" and args.steps >= 8
    for bad in (["--steps", "0"], ["--config", "huge"], ["--device", "tpu"], ["--batch", "0"]):
        with pytest.raises(SystemExit):
            tool.parse_args(bad)


def test_tool_cpu_smoke(tmp_path, capsys):
    tool = load_tool()
    out = tmp_path / "result.json"
    rc = tool.main(["--device", "cpu", "--config", "small", "--steps", "2", "--out", str(out)])
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and result["config"] == "small" and result["steps"] == 2
    assert result["fp8ext"]["converted"] == 14 and not result["fp8ext"]["skipped"]
    agreement = result["agreement"]
    assert 0.0 <= agreement["token_agreement"] <= 1.0
    assert agreement["logits_cosine_min"] >= 0.98 and len(agreement["logits_cosine_per_step"]) == 2 + 1
    # transformers' own FP8 path cannot run on the CPU: recorded, not fatal
    assert result["transformers_own_fp8"]["ran"] is False and result["transformers_own_fp8"]["error_type"]
    assert result["timings_ms"] is None and "GPU" in result["timings_skipped"]
    printed = capsys.readouterr().out
    assert "token agreement" in printed and "cosine" in printed
