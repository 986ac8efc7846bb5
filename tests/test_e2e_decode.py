"""End-to-end decode of a real transformers Qwen3 model whose projections are Fp8BlockLinear.

A small Qwen3ForCausalLM (hidden 256, intermediate 512, 4 heads x 64, 2 KV heads, 2 layers,
vocabulary 512, tied embeddings; random weights from a fixed seed, nothing downloaded) is
quantized with ``quantize_model_``. The tied ``lm_head`` is left to the sharing rule: it stays
bf16 (as in real FP8 checkpoints, which keep lm_head/embeddings unquantized), and the test
checks that the rule fired. Both models then decode with a transformers ``StaticCache``,
teacher-forced on the bf16 model's greedy tokens so that every step compares logits on the same
context (otherwise one flipped argmax would make all later steps incomparable).

CPU (CI): eager FP8 logits against eager bf16 logits, with fp32 and with power-of-two (e8m0)
scales. CUDA (skipped with the reason where there is no GPU): the same, plus the decode step as
one captured CUDA graph and under torch.compile(mode="reduce-overhead") (inductor with
``emulate_precision_casts``), both bitwise equal to eager, on the fused and the unfused
(SGL_FP8_SMALLM=0, set while capturing/compiling) paths.

Tolerance (FP8 against bf16), per decode step and batch row, on the logit vectors:
``cosine >= 0.98`` and ``||fp8 - bf16|| / ||bf16|| <= 0.2``. Why: e4m3 keeps 3 mantissa bits, so
every weight and every activation is rounded with up to 2^-4 relative error (about 3.6 % rms);
each projection's output then carries about 5 % rms relative error, and 14 projections (some in
series: v -> o, gate/up -> down) compound to about 10 % at the logits; this model measures 9-13 %
(cosine >= 0.99) on the CPU. The bound leaves room for other accumulation orders (GPU). A broken
kernel fails it clearly; measured on this model (see ``test_e2e_decode_catches_wrong_scales``,
which keeps that check in the suite): scales taken from the wrong blocks give relative error
>= 1.1, all scales replaced by their mean >= 1.0, one projection type's scales doubled >= 0.5.
That separation needs block scales that differ between blocks, which i.i.d.-initialized weights
do not have; ``build_qwen3(block_spread=1.0)`` gives each 128x128 block its own magnitude.
"""

from __future__ import annotations

import importlib.util
import os
import time

import pytest
import torch

import sglang_fp8ext as fx
import qwen3_decode as qd

transformers, NO_TRANSFORMERS = qd.import_transformers()
needs_transformers = pytest.mark.skipif(transformers is None, reason=NO_TRANSFORMERS or "")

PROMPT_LEN = 7
STEPS = 6
BATCH = 2
MAX_CACHE = 32

# FP8 vs bf16 (see the module docstring for why these numbers)
FP8_MIN_COS = 0.98
FP8_MAX_REL = 0.2

SWITCHES = ("SGL_FP8_SMALLM", "SGLANG_ROCM_SMALLM_FP8_BS", "SGLANG_DSV4_DENSE_MXSCALE", "SGLANG_DSV4_DENSE_MXSCALE_SHAPES")


@pytest.fixture(autouse=True)
def _clean_switches(monkeypatch):
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)


def make_models(device, scales="fp32", monkeypatch=None):
    """(bf16 model, fp8 model, prompt, greedy tokens of the bf16 model)."""
    model = qd.build_qwen3(qd.SMALL, seed=0, device=device, block_spread=1.0)
    if scales == "e8m0":
        monkeypatch.setenv("SGLANG_DSV4_DENSE_MXSCALE", "1")
    fp8, report = qd.fp8_copy(model, power_of_two_scales=(scales == "e8m0"))
    assert len(report.swapped) == 14, report  # 7 projections x 2 layers
    assert list(report.skipped) == ["lm_head"] and "shared" in report.skipped["lm_head"], report
    assert fp8.lm_head.weight is fp8.model.embed_tokens.weight
    mods = [m for m in fp8.modules() if isinstance(m, fx.Fp8BlockLinear)]
    assert len(mods) == 14 and all((m.weight_scale_e8m0 is not None) == (scales == "e8m0") for m in mods)
    g = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, qd.SMALL["vocab_size"], (BATCH, PROMPT_LEN), generator=g).to(device)
    tokens = qd.greedy_tokens(model, prompt, STEPS, MAX_CACHE)
    return model, fp8, prompt, tokens


def check_fp8_vs_bf16(got, ref, what):
    assert got.shape == ref.shape == (STEPS + 1, BATCH, qd.SMALL["vocab_size"])
    assert torch.isfinite(got).all(), f"{what}: non-finite logits"
    cos, rel = qd.logit_agreement(got, ref)
    assert cos.min() >= FP8_MIN_COS and rel.max() <= FP8_MAX_REL, (
        f"{what}: logits vs bf16: min cosine {cos.min():.4f} (bound {FP8_MIN_COS}), "
        f"max relative error {rel.max():.4f} (bound {FP8_MAX_REL}); per step: {rel.amax(dim=1).tolist()}"
    )
    return cos, rel


def eager_logits(model, prompt, tokens):
    return qd.teacher_forced_logits(qd.Decoder(model, BATCH, MAX_CACHE), prompt, tokens)


@needs_transformers
@pytest.mark.parametrize("scales", ["fp32", "e8m0"])
def test_e2e_decode_fp8_vs_bf16(device, scales, monkeypatch):
    t0 = time.time()
    model, fp8, prompt, tokens = make_models(device, scales, monkeypatch)
    ref = eager_logits(model, prompt, tokens)
    got = eager_logits(fp8, prompt, tokens)
    cos, rel = check_fp8_vs_bf16(got, ref, f"eager {device} {scales}")
    # the cache really advanced: a decode step differs from the prefill's logits
    assert not torch.equal(got[0], got[1])
    agree = (got.argmax(-1) == ref.argmax(-1)).float().mean().item()
    print(
        f"\n[e2e {device} {scales}] min cos {cos.min():.4f} max rel {rel.max():.4f} "
        f"top-1 agreement {agree:.2f} ({time.time() - t0:.1f} s)"
    )


@needs_transformers
def test_e2e_decode_catches_wrong_scales(monkeypatch):
    """The tolerance above is not too loose to notice a broken kernel: the same FP8 model whose
    projections read the scales of the wrong blocks (rows and columns reversed) must fail it."""
    model, fp8, prompt, tokens = make_models("cpu")
    ref = eager_logits(model, prompt, tokens)

    def wrong_block_scales(self, x):
        ws = self.weight_scale_inv.flip(0).flip(1).contiguous()
        return fx.fp8_block_linear(x, self.weight, ws, bias=self.bias)

    monkeypatch.setattr(fx.Fp8BlockLinear, "forward", wrong_block_scales)
    bad = eager_logits(fp8, prompt, tokens)
    with pytest.raises(AssertionError, match="logits vs bf16"):
        check_fp8_vs_bf16(bad, ref, "wrong block scales")


@needs_transformers
def test_e2e_decode_cuda_graph_and_compile(gpu):
    model, fp8, prompt, tokens = make_models(gpu)
    ref = eager_logits(model, prompt, tokens)
    results = {}
    for path, switch in (("fused", None), ("unfused", "0")):
        with qd.env("SGL_FP8_SMALLM", switch):
            eager = eager_logits(fp8, prompt, tokens)
        graph_dec = qd.Decoder(fp8, BATCH, MAX_CACHE, mode="graph", capture_env=("SGL_FP8_SMALLM", switch))
        graph = qd.teacher_forced_logits(graph_dec, prompt, tokens)
        del graph_dec
        torch._dynamo.reset()
        # emulate_precision_casts: inductor rounds its fused bf16 intermediates (RMSNorm, rotary,
        # SiLU) exactly where eager does. Without it, those 1-ulp differences change a few FP8
        # activation roundings in the next projection, and the differences compound (relative
        # error up to ~6e-2 at the logits). With it, compiled and eager logits are bitwise equal.
        with torch._inductor.config.patch(emulate_precision_casts=True):
            comp_dec = qd.Decoder(fp8, BATCH, MAX_CACHE, mode="compile", capture_env=("SGL_FP8_SMALLM", switch))
            compiled = qd.teacher_forced_logits(comp_dec, prompt, tokens)
        del comp_dec
        torch._dynamo.reset()

        for name, got in (("eager", eager), ("graph", graph), ("compile", compiled)):
            check_fp8_vs_bf16(got, ref, f"{path} {name}")
        # replaying the captured step runs the same kernels on the same data as eager
        assert torch.equal(graph, eager), f"{path}: CUDA graph replay differs from eager: max |diff| {(graph - eager).abs().max()}"
        cos, rel = qd.logit_agreement(compiled, eager)
        assert torch.equal(compiled, eager), (
            f"{path}: torch.compile (reduce-overhead) differs from eager: min cosine {cos.min():.6f}, "
            f"max relative error {rel.max():.2e}"
        )
        results[path] = eager
    # Fused and unfused are not compared with each other beyond both meeting the FP8 bound: their
    # accumulation orders differ, so a bf16 output may round the other way, and (as above) such
    # 1-ulp differences are amplified by the next layer's FP8 activation quantization.
    assert not torch.equal(results["fused"], ref)


# ---- the benchmark tool (no GPU needed for its command line) ----------------------------------------


def load_bench_tool():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "e2e_decode_bench.py")
    spec = importlib.util.spec_from_file_location("e2e_decode_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_tool_command_line(tmp_path):
    bench = load_bench_tool()
    args = bench.parse_args(["--out", str(tmp_path / "x.json"), "--batches", "1,8", "--replays", "25", "--config", "small"])
    assert args.batches == [1, 8] and args.replays == 25 and args.config == "small"
    assert bench.parse_args([]).batches == [1, 8, 32]
    with pytest.raises(SystemExit):
        bench.parse_args(["--replays", "5"])  # a median of fewer than 20 replays is refused
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="CUDA"):
            bench.main(["--out", str(tmp_path / "x.json")])
        assert not (tmp_path / "x.json").exists()
