"""Greedy generation of a transformers Qwen3-style model loaded with transformers' fine-grained FP8
quantization (``FineGrainedFP8Config``, quantized on load, 128x128 blocks) and run through
sglang_fp8ext (``sglang_fp8ext.integrations.transformers.use_sglang_fp8ext``), against the same
model in bf16 and against what transformers' own FP8 path does on this machine (issue 51,
deliverable 3).

When: on a CUDA GPU (an H200), after a change to the transformers integration, the dispatch or the
kernels, and to produce the numbers for issue 51's closing note. It needs no network: the model is
built from a ``Qwen3Config`` with random weights (fixed seed), saved to a temporary directory and
loaded from there (``HF_HUB_OFFLINE=1`` is set unless already set, so transformers' hub-kernel
download fails fast instead of hanging). Run from the repository root (needs ``accelerate``):

    python tools/transformers_fp8_generate.py --out transformers_fp8_generate.json
    python tools/transformers_fp8_generate.py --config small --steps 8   # quick

About 1-3 minutes on an H200 with the defaults (``--config bench``: tests/qwen3_decode.py BENCH,
hidden 4096, intermediate 12288, 32 x 128 query heads, 8 KV heads, 4 layers, vocabulary 32000,
tied embeddings; batch 1, a 16-token prompt, 32 generated tokens); ``--no-compile`` skips the
torch.compile variant (the slowest part to set up). ``--device cpu`` is the smoke run the CPU tests
use: the model is block-quantized here and loaded as a pre-quantized checkpoint with
``load_fp8_model`` (transformers refuses to quantize on load without a GPU), and no timing is done.

What it does and reports:
  * bf16 model and FP8 model (``use_sglang_fp8ext``: how many FP8Linear converted, which skipped)
    each generate ``--steps`` tokens greedily with ``generate(cache_implementation="static")``
    (eager): ``token_agreement`` = fraction of generated positions where the FP8 token equals the
    bf16 token (and the first position where they differ).
  * Logits, teacher-forced on the bf16 model's tokens (so both models see the same contexts): cosine
    similarity per step (prefill's last position, then each decode step), min over the batch;
    ``logits_cosine_min`` over the steps.
  * Per-step decode time (CUDA events around each step, median over the steps, after one untimed
    pass over the same tokens): bf16 eager and CUDA graph; sglang_fp8ext eager, CUDA graph (one
    decode step captured with torch.cuda.graphs over the static cache, replayed) and
    torch.compile(mode="reduce-overhead", fullgraph=True); with the graph and compile variants'
    logits compared against eager (graph: bitwise).
  * transformers' own FP8 path on the same FP8 model before conversion: one forward is tried (with
    a 120 s alarm); if it raises (offline: the hub kernel cannot be fetched), the exception type and
    first line are recorded; if it runs, its eager per-step time is measured too.

Writes JSON to --out and prints a short table. Exit status: 0 when the run completed (whatever
transformers' own path did), 1 on a real failure (an exception in this package's path, no
FP8Linear converted, non-finite FP8 logits, logits cosine against bf16 below --min-cosine, a CUDA
graph or compiled step that disagrees with eager), 2 when the requested device is not there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import traceback

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))  # the decode harness shared with the e2e tests
sys.path.append(REPO)  # the source tree's package when none is installed (an installed one wins)

import qwen3_decode as qd  # noqa: E402
from sglang_fp8ext.bench import git_commit  # noqa: E402

CONFIGS = {"bench": qd.BENCH, "small": qd.SMALL}
OWN_PATH_TIMEOUT_S = 120


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="transformers_fp8_generate.json", help="JSON output path (default: %(default)s)")
    p.add_argument("--config", choices=sorted(CONFIGS), default="bench", help="model size (default: %(default)s)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cuda: the real run; cpu: a smoke run without timing")
    p.add_argument("--steps", type=_positive, default=32, help="generated tokens (default: %(default)s)")
    p.add_argument("--batch", type=_positive, default=1, help="sequences decoded together (default: %(default)s)")
    p.add_argument("--prompt-len", type=_positive, default=16, help="prompt tokens (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    # transformers' quantize-on-load rounds coarser than quantize_weight_blocks (its FP8 weights of
    # the bench model dequantize with ~3.9 % relative error against 2.6 %): on the random-weight
    # bench model FP8 logits then reach a cosine of 0.96-0.97 against bf16 through this package, on
    # the CPU as on the H200; the bound catches a broken path, not that rounding.
    p.add_argument("--min-cosine", type=float, default=0.95, help="fail below this FP8-vs-bf16 logits cosine (default: %(default)s)")
    return p.parse_args(argv)



def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else ""


@contextlib.contextmanager
def alarm(seconds: int):
    """Raise TimeoutError in the main thread after ``seconds`` (no-op elsewhere)."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"no result within {seconds} s")

    try:
        old = signal.signal(signal.SIGALRM, on_alarm)
    except ValueError:  # not the main thread
        yield
        return
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---- models ------------------------------------------------------------------------------------


def save_prequantized(model, directory: str) -> None:
    """Write ``model`` as a fine-grained FP8 checkpoint (the CPU smoke run's stand-in for
    quantize-on-load): projection weights block-quantized (e4m3 + fp32 weight_scale_inv)."""
    from safetensors.torch import save_file

    from sglang_fp8ext.module import quantize_weight_blocks

    os.makedirs(directory, exist_ok=True)
    tensors = {}
    for key, t in model.state_dict().items():
        if key == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        if key.endswith("proj.weight"):
            q, s = quantize_weight_blocks(t)
            tensors[key], tensors[key[: -len("weight")] + "weight_scale_inv"] = q.cpu(), s.cpu()
        else:
            tensors[key] = t.detach().cpu().contiguous()
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(directory)
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


def load_fp8(bf16_model, tmp: str, device: str):
    """The FP8 model, NOT yet converted, and how it was loaded."""
    import transformers

    from sglang_fp8ext.integrations.transformers import load_fp8_model

    if device == "cuda":
        bf16_dir = os.path.join(tmp, "bf16")
        bf16_model.save_pretrained(bf16_dir)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            bf16_dir,
            quantization_config=transformers.FineGrainedFP8Config(activation_scheme="dynamic", weight_block_size=(128, 128)),
            dtype=torch.bfloat16,
            device_map="cuda",
            local_files_only=True,
        )
        return model.eval(), "transformers FineGrainedFP8Config, quantized on load (block 128x128)"
    fp8_dir = os.path.join(tmp, "fp8")
    save_prequantized(bf16_model, fp8_dir)
    model = load_fp8_model(fp8_dir, convert=False, dtype=torch.bfloat16, local_files_only=True)
    return model.eval(), "pre-quantized checkpoint written here, load_fp8_model (CPU smoke run)"


@torch.no_grad()
def generate(model, prompt: torch.Tensor, steps: int) -> torch.Tensor:
    out = model.generate(
        prompt, max_new_tokens=steps, min_new_tokens=steps, do_sample=False, cache_implementation="static",
        disable_compile=True, pad_token_id=0,
    )
    return out[:, prompt.shape[1]:]


def decode_pass(model, mode: str, prompt: torch.Tensor, tokens: torch.Tensor, timed: bool):
    """Teacher-forced decode over ``tokens``: one untimed pass (warm-up / compilation), a cache
    reset, then the pass that counts. Returns (logits [S + 1, B, V] float32, per-step ms or None)."""
    max_len = prompt.shape[1] + tokens.shape[1] + 1
    dec = qd.Decoder(model, prompt.shape[0], max_len, mode)
    times = []
    logits = None
    for attempt in range(2):
        dec.cache.reset()
        out = [dec.prefill(prompt)]
        times = []
        for i in range(tokens.shape[1]):
            ids = tokens[:, i : i + 1]
            if timed and attempt == 1:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out.append(dec.step(ids))
                end.record()
                times.append((start, end))
            else:
                out.append(dec.step(ids))
        logits = torch.stack(out)
    ms = None
    if timed:
        torch.cuda.synchronize()
        ms = [s.elapsed_time(e) for s, e in times]
    del dec
    return logits, ms


def try_transformers_own_path(model, prompt: torch.Tensor) -> dict:
    """One forward of the unconverted FP8 model: what transformers' own FP8 path does here."""
    try:
        with alarm(OWN_PATH_TIMEOUT_S), torch.no_grad():
            logits = model(input_ids=prompt).logits
            if prompt.is_cuda:
                torch.cuda.synchronize()
        return {"ran": True, "finite": bool(torch.isfinite(logits).all())}
    except Exception as err:  # noqa: BLE001 - recording what it does is the point
        return {"ran": False, "error_type": type(err).__name__, "error": first_line(err)}


# ---- report ------------------------------------------------------------------------------------


def write_json(result: dict, path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2, sort_keys=False)
        f.write("\n")


def _ms(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_table(result: dict) -> str:
    lines = [
        f"transformers_fp8_generate: {result.get('device_name', result['device'])}, config {result['config']}, "
        f"batch {result['batch']}, prompt {result['prompt_len']}, {result['steps']} steps, git {result['git'][:12]}",
    ]
    if result.get("load"):
        lines.append(f"  FP8 model: {result['load']}")
    fx = result.get("fp8ext")
    if fx:
        skipped = "; ".join(f"{k}: {v}" for k, v in fx["skipped"].items()) or "none"
        lines.append(f"  sglang_fp8ext: {fx['converted']} FP8Linear converted, skipped: {skipped}")
    ag = result.get("agreement")
    if ag:
        div = ag["first_divergence"]
        lines.append(
            f"  token agreement with bf16: {ag['token_agreement']:.3f}"
            + (" (all tokens equal)" if div is None else f" (first divergence at generated token {div})")
        )
        lines.append(
            f"  logits cosine vs bf16 (teacher-forced, per step min over batch): min {ag['logits_cosine_min']:.5f}, "
            f"mean {statistics.fmean(ag['logits_cosine_per_step']):.5f}"
        )
    own = result.get("transformers_own_fp8")
    if own:
        if own["ran"]:
            lines.append(f"  transformers' own FP8 path: ran (finite logits: {own['finite']})")
        else:
            lines.append(f"  transformers' own FP8 path: {own['error_type']}: {own['error']}")
    t = result.get("timings_ms")
    if t is None:
        lines.append(f"  per-step decode time: not measured ({result.get('timings_skipped', '')})")
    else:
        lines.append("  per-step decode time, median ms:      eager  cuda-graph     compile")
        for name, row in t.items():
            lines.append(f"    {name:32s} {_ms(row.get('eager')):>8s} {_ms(row.get('graph')):>11s} {_ms(row.get('compile')):>11s}")
        checks = result.get("mode_checks", {})
        if checks:
            lines.append("  " + ", ".join(f"{k}: {v}" for k, v in checks.items()))
    if result.get("failures"):
        lines.append("  FAILURES: " + "; ".join(result["failures"]))
    return "\n".join(lines)


# ---- main --------------------------------------------------------------------------------------


def run(args, result: dict) -> None:
    import transformers

    from sglang_fp8ext.integrations.transformers import use_sglang_fp8ext

    device = args.device
    dims = CONFIGS[args.config]
    on_gpu = device == "cuda"
    bf16 = qd.build_qwen3(dims, seed=args.seed, device=device, block_spread=1.0)
    g = torch.Generator().manual_seed(args.seed + 2)
    prompt = torch.randint(0, dims["vocab_size"], (args.batch, args.prompt_len), generator=g).to(device)

    with tempfile.TemporaryDirectory(prefix="transformers_fp8_") as tmp:
        t0 = time.perf_counter()
        fp8, how = load_fp8(bf16, tmp, device)
        result["load"] = how
        result["load_s"] = round(time.perf_counter() - t0, 2)

    own = try_transformers_own_path(fp8, prompt)
    result["transformers_own_fp8"] = own
    if own["ran"] and on_gpu:
        tokens_probe = torch.zeros(args.batch, args.steps, dtype=torch.long, device=device)
        _, ms = decode_pass(fp8, "eager", prompt, tokens_probe, timed=True)
        own["eager_ms"] = statistics.median(ms)

    report = use_sglang_fp8ext(fp8)
    result["fp8ext"] = {"converted": len(report.converted), "skipped": report.skipped}
    if not report.converted:
        result["failures"].append("no FP8Linear was converted")
        return

    bf16_tokens = generate(bf16, prompt, args.steps)
    fp8_tokens = generate(fp8, prompt, args.steps)
    same = (fp8_tokens == bf16_tokens)
    differing = (~same).any(dim=0).nonzero()
    bf16_logits, bf16_ms = decode_pass(bf16, "eager", prompt, bf16_tokens, timed=on_gpu)
    fp8_logits, fp8_ms = decode_pass(fp8, "eager", prompt, bf16_tokens, timed=on_gpu)
    cos, rel = qd.logit_agreement(fp8_logits, bf16_logits)
    per_step = cos.min(dim=1).values.tolist()
    result["agreement"] = {
        "token_agreement": same.float().mean().item(),
        "first_divergence": None if differing.numel() == 0 else int(differing[0]),
        "logits_cosine_per_step": per_step,
        "logits_cosine_min": min(per_step),
        "logits_rel_err_max": rel.max().item(),
        "bf16_tokens": bf16_tokens.tolist(),
        "fp8_tokens": fp8_tokens.tolist(),
    }
    if not torch.isfinite(fp8_logits).all():
        result["failures"].append("non-finite FP8 logits")
    if min(per_step) < args.min_cosine:
        result["failures"].append(f"logits cosine {min(per_step):.4f} < --min-cosine {args.min_cosine}")

    if not on_gpu:
        result["timings_ms"] = None
        result["timings_skipped"] = "per-step timing needs a CUDA GPU (CUDA events and graphs); the CPU run is a smoke test"
        return

    timings = {"bf16": {"eager": statistics.median(bf16_ms)}, "fp8 (sglang_fp8ext)": {"eager": statistics.median(fp8_ms)}}
    checks = {}
    logits, ms = decode_pass(bf16, "graph", prompt, bf16_tokens, timed=True)
    timings["bf16"]["graph"] = statistics.median(ms)
    logits, ms = decode_pass(fp8, "graph", prompt, bf16_tokens, timed=True)
    timings["fp8 (sglang_fp8ext)"]["graph"] = statistics.median(ms)
    checks["fp8 graph == eager (bitwise)"] = bool(torch.equal(logits, fp8_logits))
    graph_cos = qd.logit_agreement(logits, fp8_logits)[0].min().item()
    if graph_cos < 0.999:
        result["failures"].append(f"CUDA graph logits disagree with eager (cosine {graph_cos:.5f})")
    torch.cuda.empty_cache()
    if not args.no_compile:
        t0 = time.perf_counter()
        logits, ms = decode_pass(fp8, "compile", prompt, bf16_tokens, timed=True)
        result["compile_pass_s"] = round(time.perf_counter() - t0, 1)
        timings["fp8 (sglang_fp8ext)"]["compile"] = statistics.median(ms)
        compile_cos = qd.logit_agreement(logits, fp8_logits)[0].min().item()
        checks["fp8 compile vs eager cosine min"] = round(compile_cos, 6)
        if compile_cos < 0.99:
            result["failures"].append(f"torch.compile logits disagree with eager (cosine {compile_cos:.5f})")
    if own.get("eager_ms") is not None:
        timings["fp8 (transformers' own)"] = {"eager": own["eager_ms"]}
    result["timings_ms"] = timings
    result["mode_checks"] = checks


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("transformers_fp8_generate: --device cuda needs a CUDA GPU (torch.cuda.is_available() is False); "
              "use --device cpu for the smoke run", file=sys.stderr)
        return 2
    transformers, why = qd.import_transformers()
    if transformers is None:
        print(f"transformers_fp8_generate: {why}", file=sys.stderr)
        return 2
    result = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "git": git_commit(),
        "config": args.config,
        "dims": CONFIGS[args.config],
        "batch": args.batch,
        "prompt_len": args.prompt_len,
        "steps": args.steps,
        "seed": args.seed,
        "failures": [],
    }
    t0 = time.perf_counter()
    try:
        run(args, result)
    except Exception as err:  # noqa: BLE001 - written to the JSON, then a non-zero exit
        result["failures"].append(f"{type(err).__name__}: {first_line(err)}")
        result["traceback"] = traceback.format_exc()
        traceback.print_exc()
    result["total_s"] = round(time.perf_counter() - t0, 1)
    write_json(result, args.out)
    print(format_table(result))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    # Offline: set before anything imports huggingface_hub (it reads the variable at import), so a
    # hub-kernel download fails at once instead of waiting on the network. Nothing above imports it.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
