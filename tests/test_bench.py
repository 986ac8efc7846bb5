"""``python -m sglang_fp8ext bench`` without a GPU: what each measurement times (the graph timer
replaced by a stand-in that runs the calls once and records them), the decode-order arithmetic,
the L2-resident path, DeepGEMM's activation layout and its absence, the JSON rows, and the flags
reaching bench_gpu."""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from sglang_fp8ext import __main__ as cli
from sglang_fp8ext import bench, ops
from sglang_fp8ext import reference

# Made-up graph times (us per call) of each kind of call; a graph's stand-in time is the sum over
# the kinds it calls, less L2_SAVING when every fused call reads the same weight.
BASE = {"copy": 1.0, "quant": 0.5, "fused": 3.0, "unfused": 5.0, "bf16": 6.0, "deepgemm": 7.0}
L2_SAVING = 0.5


class Recorder:
    """Records, per stand-in graph, the kinds of calls in order and the weights the fused op read."""

    def __init__(self, monkeypatch):
        self.graphs = []
        self.inside = False
        real_smallm, real_scaled, real_linear = ops.smallm_gemm, ops.scaled_gemm, torch.nn.functional.linear
        real_quant, real_copy = ops.per1x128_quant, torch.Tensor.copy_

        def smallm_gemm(x, w, s, *args, **kwargs):
            self.event("fused", w.data_ptr())
            return real_smallm(x, w, s, *args, **kwargs)

        def scaled_gemm(*args, **kwargs):
            self.event("unfused")
            return real_scaled(*args, **kwargs)

        def per1x128_quant(*args, **kwargs):
            self.event("quant")
            return real_quant(*args, **kwargs)

        def linear(x, w, *args, **kwargs):
            self.event("bf16")
            return real_linear(x, w, *args, **kwargs)

        def copy_(t, src, *args, **kwargs):
            self.event("copy")
            return real_copy(t, src, *args, **kwargs)

        monkeypatch.setattr(ops, "smallm_gemm", smallm_gemm)
        monkeypatch.setattr(ops, "scaled_gemm", scaled_gemm)
        monkeypatch.setattr(ops, "per1x128_quant", per1x128_quant)
        monkeypatch.setattr(torch.nn.functional, "linear", linear)
        monkeypatch.setattr(torch.Tensor, "copy_", copy_)
        monkeypatch.setattr(bench, "time_in_graph", self.timer)

    def event(self, kind, ptr=None):
        if self.inside:
            self.graphs[-1].append((kind, ptr))

    def timer(self, calls, replays):
        self.graphs.append([])
        self.inside = True
        try:
            for call in calls:
                call()
        finally:
            self.inside = False
        kinds = {kind for kind, _ in self.graphs[-1]}
        fused_weights = {ptr for kind, ptr in self.graphs[-1] if kind == "fused"}
        return sum(BASE[k] for k in kinds) - (L2_SAVING if len(fused_weights) == 1 else 0.0)


class FakeDeepGEMM(types.ModuleType):
    """deep_gemm's API as bench uses it, on the CPU: fp8_gemm_nt computes with our scaled_gemm on
    the operands it is given; get_mn_major_tma_aligned_tensor copies any scale tensor that is not
    MN-major with a 4-row-aligned column stride (as DeepGEMM's does)."""

    def __init__(self, wrong_output=False):
        super().__init__("deep_gemm")
        self.__version__ = "2.6.1-test"
        self.pdl = False
        self.wrong_output = wrong_output
        self.scales_seen = []
        self.real_scaled_gemm = ops.scaled_gemm

    def set_pdl(self, value):
        self.pdl = bool(value)

    def get_pdl(self):
        return self.pdl

    def get_mn_major_tma_aligned_tensor(self, sf):
        mn, kb = sf.shape
        aligned = (mn + 3) // 4 * 4
        if sf.stride() == (1, aligned):
            return sf
        return torch.empty_strided((mn, kb), (1, aligned), dtype=sf.dtype).copy_(sf)

    def fp8_gemm_nt(self, a, b, d):
        rec = getattr(self, "recorder", None)
        if rec is not None:
            rec.event("deepgemm")
        (q, sfa), (w, sfb) = a, b
        self.scales_seen.append((tuple(sfa.shape), sfa.stride(), sfa.dtype, sfb.dtype))
        inside = rec.inside if rec is not None else False
        if rec is not None:
            rec.inside = False  # its own arithmetic is not a call of the graph
        try:
            out = self.real_scaled_gemm(q, sfa, w, sfb)
            d.copy_(out * 1.02 if self.wrong_output else out)
        finally:
            if rec is not None:
                rec.inside = inside


def weights_for(n, k, e8m0, copies=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    weights = [bench.make_weight(n, k, e8m0, "cpu", g) for _ in range(copies)]
    return weights, [bench._dequantize(w, f).to(torch.bfloat16) for w, _, f in weights], g


def no_scaled_mm(monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("cuBLASLt blockwise scaling needs sm_90")

    monkeypatch.setattr(bench, "scaled_mm_linear", refuse)


@pytest.mark.parametrize("m", [1, 3, 4, 8])
def test_deepgemm_quant_is_ours_in_the_tma_aligned_mn_major_layout(m):
    """DeepGEMM's activation operand is our quant of the zero-padded activations: q and scales of
    the first M rows are bit-identical to per1x128_quant(x), and the scales are [M, K/128] fp32
    with strides (1, M rounded up to 4), the layout DeepGEMM reads without a transpose kernel."""
    k = 384
    x_pad, x = bench.padded_activations(m, k, torch.Generator().manual_seed(m), "cpu")
    assert x_pad.shape == (bench.tma_aligned_rows(m), k) and x.data_ptr() == x_pad.data_ptr()
    assert x.is_contiguous() and torch.count_nonzero(x_pad[m:]) == 0 and torch.count_nonzero(x) > 0
    q, s = bench.deepgemm_quant(x_pad, m)
    assert s.stride() == (1, bench.tma_aligned_rows(m)) and bench.deepgemm_scale_layout_ok(s, m, k)
    q_ref, s_ref = ops.per1x128_quant(x)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    assert torch.equal(s, s_ref)
    q64, s64 = reference.per1x128_quant(x)  # and both are the SPEC quant
    assert torch.equal(q.view(torch.uint8), q64.view(torch.uint8)) and torch.equal(s, s64)


def test_deepgemm_scale_layout_check_rejects_other_layouts():
    m, k = 3, 256
    x = torch.randn(m, k).to(torch.bfloat16)
    _, row_major = ops.per1x128_quant(x)
    _, unpadded = ops.per1x128_quant(x, transpose_scale=True)  # strides (1, 3): not 16-byte aligned
    assert unpadded.stride() == (1, 3)
    assert not bench.deepgemm_scale_layout_ok(row_major, m, k)
    assert not bench.deepgemm_scale_layout_ok(unpadded, m, k)
    _, e8m0 = ops.per1x128_quant(torch.cat([x, x.new_zeros(1, k)]), ue8m0=True, transpose_scale=True)
    assert not bench.deepgemm_scale_layout_ok(e8m0[:m], m, k)  # sm90 DeepGEMM takes fp32 scales
    assert [bench.tma_aligned_rows(m) for m in (1, 2, 3, 4, 5, 8, 31, 32)] == [4, 4, 4, 4, 8, 8, 32, 32]


def test_load_deepgemm_absent_or_incomplete_is_a_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "deep_gemm", None)  # import deep_gemm raises ImportError
    dg, info = bench.load_deepgemm()
    assert dg is None and info["present"] is False and info["reason"].startswith("import deep_gemm failed: ")
    partial = types.ModuleType("deep_gemm")
    partial.fp8_gemm_nt = lambda *a: None
    monkeypatch.setitem(sys.modules, "deep_gemm", partial)
    dg, info = bench.load_deepgemm()
    assert dg is None and "set_pdl" in info["reason"] and "get_mn_major_tma_aligned_tensor" in info["reason"]
    fake = FakeDeepGEMM()
    monkeypatch.setitem(sys.modules, "deep_gemm", fake)
    dg, info = bench.load_deepgemm()
    assert dg is fake and fake.pdl is True  # PDL switched on: its best setting
    assert info["present"] is True and info["version"] == "2.6.1-test" and info["pdl"] is True
    assert info["failures"] == [] and info["scale_layout_copy_free"] is True


FAKE_DEEPGEMM_ON_DISK = """
import os, signal, time
__version__ = "2.6.1-disk"
_pdl = [False]
def set_pdl(value): _pdl[0] = bool(value)
def get_pdl(): return _pdl[0]
def get_mn_major_tma_aligned_tensor(sf): return sf
def fp8_gemm_nt(a, b, d):
    (q, sfa), (w, sfb) = a, b
    m, k = q.shape
    n = w.shape[0]
    # the operands as deepgemm_ready checks them
    assert str(q.dtype) == str(w.dtype) == "torch.float8_e4m3fn", (q.dtype, w.dtype)
    assert tuple(sfa.shape) == (m, k // 128) and sfa.stride() == (1, (m + 3) // 4 * 4), sfa.stride()
    assert tuple(sfb.shape) == ((n + 127) // 128, k // 128) and tuple(d.shape) == (m, n), (sfb.shape, d.shape)
    mode = os.environ["FAKE_DEEPGEMM_MODE"]
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "raise":
        raise RuntimeError("JIT: nvcc exited with code 1")
    if mode == "hang":
        time.sleep(120)
    d.zero_()
"""


@pytest.mark.parametrize("mode", ["ok", "crash", "raise", "hang"])
def test_load_deepgemm_probes_its_first_call_in_a_child(monkeypatch, tmp_path, mode):
    """A deep_gemm whose first fp8_gemm_nt kills its process (SIGSEGV), raises or never returns is
    a recorded reason to run without the peer, not the end of the bench; one that returns is loaded."""
    package = tmp_path / "deep_gemm"
    package.mkdir()
    (package / "__init__.py").write_text(FAKE_DEEPGEMM_ON_DISK)
    monkeypatch.delitem(sys.modules, "deep_gemm", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))  # the child gets this directory from deep_gemm's path
    monkeypatch.setenv("FAKE_DEEPGEMM_MODE", mode)
    monkeypatch.setattr(bench, "DEEPGEMM_PROBE_TIMEOUT_S", 10)
    dg, info = bench.load_deepgemm(torch.device("cpu"), probe=(320, 384, 3))
    if mode == "ok":
        assert dg is sys.modules["deep_gemm"] and info["present"] is True and info["pdl"] is True
        assert info["version"] == "2.6.1-disk"
        return
    assert dg is None and info["present"] is False
    reason = info["reason"]
    assert reason.startswith("deep_gemm: its first call ") and "(probe process, N=320 K=384 M=3;" in reason
    expected = {"crash": "was killed by SIGSEGV", "raise": "exited with code 1",
                "hang": "did not return within 10 s"}[mode]
    assert expected in reason, reason
    if mode == "raise":
        assert reason.endswith(": RuntimeError: JIT: nvcc exited with code 1"), reason


def with_fake_deepgemm(monkeypatch):
    """A Recorder, cuBLASLt refused, and the fake DeepGEMM loaded as the run's peer: (rec, fake, dg, info)."""
    rec = Recorder(monkeypatch)
    no_scaled_mm(monkeypatch)
    fake = FakeDeepGEMM()
    fake.recorder = rec
    monkeypatch.setitem(sys.modules, "deep_gemm", fake)
    dg, info = bench.load_deepgemm()
    return rec, fake, dg, info


@pytest.mark.parametrize("e8m0", [False, True])
def test_point_orders_l2_and_deepgemm(monkeypatch, e8m0):
    n, k, m = 256, 256, 3
    weights, bf16_weights, g = weights_for(n, k, e8m0)
    rec, fake, dg, info = with_fake_deepgemm(monkeypatch)
    row = bench.measure_point(n, k, m, e8m0, weights, bf16_weights, g, replays=1, copy_tbps=1.0, dg=dg, dg_info=info)
    assert info["failures"] == [] and info["scale_layout_copy_free"]
    # DeepGEMM got our fp32 activation scales in its layout and fp32 weight scales (e8m0 rows too)
    assert fake.scales_seen and all(seen == ((m, k // 128), (1, 4), torch.float32, torch.float32)
                                    for seen in fake.scales_seen)
    # back to back, cold: every path over all the weight copies, no producer
    assert row.fused_us == BASE["fused"]
    # the quant is inside every quant + GEMM path's graph, and outside DeepGEMM's GEMM alone
    peers = {bench.SCALED_MM_PEER: None, bench.DEEPGEMM_PEER: BASE["quant"] + BASE["deepgemm"],
             bench.DEEPGEMM_GEMM_PEER: BASE["deepgemm"], bench.UNFUSED_PEER: BASE["quant"] + BASE["unfused"],
             bench.BF16_PEER: BASE["bf16"]}
    assert row.peers == peers and list(row.peers) == list(bench.PEER_ORDER)
    # L2-resident: the fused op on one weight, as many calls
    assert row.l2_resident_us == BASE["fused"] - L2_SAVING
    l2 = [gr for gr in rec.graphs if {p for kind, p in gr if kind == "fused"} == {weights[0][0].data_ptr()}]
    assert len(l2) == 1 and len(l2[0]) == len(weights)
    # decode order: producer + call minus the producer alone, for the fused op and every peer
    assert row.decode == {"producer_us": BASE["copy"], "fused_us": BASE["fused"], "peers": peers}
    decode_graphs = [gr for gr in rec.graphs if gr and gr[0][0] == "copy" and len(gr) > len(weights)]
    calls_after_copy = []
    for gr in decode_graphs:  # copy, one call's kernels, copy, the next call's, ...
        kinds = [kind for kind, _ in gr]
        starts = [i for i, kind in enumerate(kinds) if kind == "copy"]
        assert len(starts) == len(weights), kinds
        segments = [tuple(kinds[i + 1:j]) for i, j in zip(starts, starts[1:] + [len(kinds)])]
        assert len(set(segments)) == 1 and segments[0], kinds
        calls_after_copy.append(segments[0])
    assert sorted(calls_after_copy) == sorted([("fused",), ("quant", "deepgemm"), ("deepgemm",), ("quant", "unfused"),
                                               ("bf16",)])
    fused_decode = next(gr for gr in decode_graphs if gr[1][0] == "fused")
    assert len({p for kind, p in fused_decode if kind == "fused"}) == len(weights)  # cold in decode order too
    producer_alone = [gr for gr in rec.graphs if gr and {kind for kind, _ in gr} == {"copy"}]
    assert len(producer_alone) == 1 and len(producer_alone[0]) == len(weights)
    # the row is the JSON row
    raw = json.loads(json.dumps(row.__dict__))
    assert list(raw) == ["N", "K", "M", "scale", "fused_us", "floor_us", "l2_resident_us", "peers", "decode",
                         "diagnostics"]
    assert raw["scale"] == ("e8m0" if e8m0 else "fp32")
    assert raw["floor_us"] == pytest.approx(bench.op_bytes(n, k, m, e8m0) / 1e6)


def test_point_without_deepgemm_or_decode(monkeypatch):
    weights, bf16_weights, g = weights_for(256, 128, False, copies=2)
    rec = Recorder(monkeypatch)
    no_scaled_mm(monkeypatch)
    info = {"present": False, "reason": "switched off (--no-deepgemm)"}
    row = bench.measure_point(256, 128, 1, False, weights, bf16_weights, g, 1, 1.0, None, info, decode=False)
    assert not set(bench.DEEPGEMM_PEERS) & set(row.peers) and row.decode is None
    assert row.l2_resident_us == BASE["fused"] - L2_SAVING
    assert not any(kind == "copy" for gr in rec.graphs for kind, _ in gr)


@pytest.mark.parametrize("broken", ["copies_scales", "wrong_output"])
def test_point_deepgemm_failures_are_recorded_not_timed(monkeypatch, broken):
    weights, bf16_weights, g = weights_for(256, 256, False, copies=2)
    rec = Recorder(monkeypatch)
    no_scaled_mm(monkeypatch)
    fake = FakeDeepGEMM(wrong_output=broken == "wrong_output")
    if broken == "copies_scales":
        fake.get_mn_major_tma_aligned_tensor = lambda sf: sf.clone()
    monkeypatch.setitem(sys.modules, "deep_gemm", fake)
    dg, info = bench.load_deepgemm()
    row = bench.measure_point(256, 256, 4, False, weights, bf16_weights, g, 1, 1.0, dg, info)
    for name in bench.DEEPGEMM_PEERS:
        assert row.peers[name] is None and row.decode["peers"][name] is None
    assert row.peers[bench.UNFUSED_PEER] == BASE["quant"] + BASE["unfused"]
    assert len(info["failures"]) == 1 and info["failures"][0].startswith("N=256 K=256 M=4 fp32: ")
    if broken == "copies_scales":
        assert info["scale_layout_copy_free"] is False and "copies our scales" in info["failures"][0]
    else:
        assert info["scale_layout_copy_free"] is True and "differs from scaled_gemm" in info["failures"][0]
    assert not any(kind == "deepgemm" for gr in rec.graphs for kind, _ in gr)


def test_deepgemm_gemm_alone_takes_the_quantized_activations_as_given(monkeypatch):
    """The GEMM-alone peer multiplies the activations deepgemm_quant gave: the same output as
    quant + GEMM on the same x, [M, N] bf16, and no quant of its own."""
    n, k, m = 256, 384, 3
    (w, _, f), = weights_for(n, k, False, copies=1)[0]
    x_pad, _ = bench.padded_activations(m, k, torch.Generator().manual_seed(1), "cpu")
    fake = FakeDeepGEMM()
    a = bench.deepgemm_quant(x_pad, m)
    quants = []
    real_quant = ops.per1x128_quant
    monkeypatch.setattr(ops, "per1x128_quant", lambda *args, **kwargs: quants.append(1) or real_quant(*args, **kwargs))
    alone = bench.deepgemm_gemm(fake, a, w, f)
    assert not quants
    both = bench.deepgemm_linear(fake, x_pad, m, w, f)
    assert len(quants) == 1
    assert alone.shape == (m, n) and alone.dtype == torch.bfloat16 and torch.equal(alone, both)


def test_point_deepgemm_capture_failure_skips_that_path_only(monkeypatch):
    """A DeepGEMM path whose graph cannot be captured is recorded as a failure and left untimed;
    the other DeepGEMM path and the rest of the point are still timed."""
    weights, bf16_weights, g = weights_for(256, 256, False, copies=2)
    rec, _, dg, info = with_fake_deepgemm(monkeypatch)
    stand_in = rec.timer

    def timer(calls, replays):  # a graph of the GEMM alone fails to capture
        t = stand_in(calls, replays)
        if {kind for kind, _ in rec.graphs[-1]} == {"deepgemm"}:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        return t

    monkeypatch.setattr(bench, "time_in_graph", timer)
    row = bench.measure_point(256, 256, 4, False, weights, bf16_weights, g, 1, 1.0, dg, info, decode=False)
    assert row.peers[bench.DEEPGEMM_GEMM_PEER] is None
    assert row.peers[bench.DEEPGEMM_PEER] == BASE["quant"] + BASE["deepgemm"]
    assert row.fused_us == BASE["fused"] and row.peers[bench.UNFUSED_PEER] == BASE["quant"] + BASE["unfused"]
    assert len(info["failures"]) == 1
    assert info["failures"][0].startswith(f"N=256 K=256 M=4 fp32: {bench.DEEPGEMM_GEMM_PEER} not timed: CUDA error")


def bench_args(*argv):
    return cli.build_parser().parse_args(["bench", *argv])


def test_bench_flags_parse():
    args = bench_args()
    assert (args.no_deepgemm, args.no_decode, args.copies, args.replays) == (False, False, 24, 25)
    args = bench_args("--no-deepgemm", "--no-decode", "--ms", "1,2", "--shapes", "256x128", "--diagnose")
    assert (args.no_deepgemm, args.no_decode, args.diagnose) == (True, True, True)
    assert bench.parse_shapes(args.shapes) == [(256, 128)]
    assert bench.parse_shapes("5120x4096,8X1024") == [(5120, 4096), (8, 1024)]
    spec = bench.parse_shapes("spec")
    assert len(spec) == 7 and (5120, 4096) in spec and (2112, 7168) in spec and len(set(spec)) == 7


@pytest.mark.parametrize("argv", [[], ["--no-deepgemm", "--no-decode"]])
def test_main_passes_the_flags_and_writes_the_json(monkeypatch, tmp_path, capsys, argv):
    """bench.main on a (pretended) GPU: the flags reach bench_gpu, the table prints both orders and
    the DeepGEMM line, and the JSON carries what bench_gpu returned."""
    weights, bf16_weights, g = weights_for(256, 128, False, copies=2)
    Recorder(monkeypatch)
    no_scaled_mm(monkeypatch)
    seen = {}

    def fake_bench_gpu(shapes, ms, copies, replays, diagnose, out_dir, deepgemm=True, decode=True):
        seen.update(shapes=shapes, ms=ms, deepgemm=deepgemm, decode=decode)
        info = {"present": False, "reason": "import deep_gemm failed: ModuleNotFoundError: No module named 'deep_gemm'"}
        rows = [bench.measure_point(256, 128, m, False, weights, bf16_weights, g, 1, 1.0, None, info, decode=decode)
                for m in ms]
        return {"device": "Test GPU", "torch": torch.__version__, "git": "abc", "copy_TBps": 1.0, "weight_copies": 2,
                "replays": 1, "orders": ["back_to_back", "decode"] if decode else ["back_to_back"], "deepgemm": info,
                "rows": [r.__dict__ for r in rows]}

    monkeypatch.setattr(bench.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench, "bench_gpu", fake_bench_gpu)
    monkeypatch.setattr(bench, "plot_gpu", lambda result, path: None)
    assert bench.main(bench_args("--shapes", "256x128", "--ms", "1,2", "--out", str(tmp_path), "--name", "t", *argv)) == 0
    assert seen == {"shapes": [(256, 128)], "ms": [1, 2], "deepgemm": not argv, "decode": not argv}
    out = capsys.readouterr().out
    assert "DeepGEMM not measured: import deep_gemm failed" in out
    assert ("decode order: after a producer kernel" in out) == (not argv)
    raw = json.loads((tmp_path / "t.json").read_text())
    assert raw["deepgemm"]["present"] is False and [r["M"] for r in raw["rows"]] == [1, 2]
    assert all(not set(bench.DEEPGEMM_PEERS) & set(r["peers"]) for r in raw["rows"])
    assert all((r["decode"] is None) == bool(argv) for r in raw["rows"])
    assert all(r["l2_resident_us"] == BASE["fused"] - L2_SAVING for r in raw["rows"])


def test_cpu_flags_are_accepted(tmp_path):
    """The CPU bench ignores the GPU-only flags (they must not break it)."""
    args = bench_args("--cpu", "--shapes", "256x128", "--ms", "1", "--repeats", "1", "--out", str(tmp_path),
                      "--no-deepgemm", "--no-decode")
    assert bench.main(args) == 0
    raw = json.loads((tmp_path / "bench_cpu.json").read_text())
    assert raw["device"] == "cpu" and [(r["N"], r["M"]) for r in raw["rows"]] == [(256, 1)]

