"""CPU tests of the measuring tools' arithmetic (the GPU parts need a device): the per-kernel
statistics of tools/e2e_kernel_profile.py, the chrome-trace reader, the item syntax of
tools/sequence_profile.py and the ratios tools/binary_ab_report.py prints. Expected values are
worked out here by hand from the synthetic inputs, not taken from the tools."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(REPO, "tools")


def load_tool(name):
    sys.path.insert(0, TOOLS)
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(TOOLS, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(TOOLS)


def test_kernel_profile_marginal_and_gap():
    """Two replays of a 3-kernel step; the second kernel started early (PDL) in replay 1."""
    prof = load_tool("e2e_kernel_profile")
    gemm = "void sgl_fp8::sm90::wgmma_ring_gemm_sm90<1, false, 4>(sgl_fp8::sm90::GemmKernelArgs)"
    records = [
        # replay 0: norm 0-2, gemm 2.5-12.5, copy 13-14
        (0.0, 2.0, "norm"), (2.5, 12.5, gemm), (13.0, 14.0, "copy"),
        # replay 1: norm 100-102, gemm 101-110 (entered 1 us early), copy 110.5-112
        (100.0, 102.0, "norm"), (101.0, 110.0, gemm), (110.5, 112.0, "copy"),
    ]
    step_us, kernels, by_kind = prof.step_statistics(records, 2)
    assert step_us == pytest.approx((14.0 + 12.0) / 2)
    assert [k["name"] for k in kernels] == ["norm", gemm, "copy"]
    assert kernels[1]["dur_us"] == pytest.approx((10.0 + 9.0) / 2)
    assert kernels[1]["marginal_us"] == pytest.approx((10.5 + 8.0) / 2)  # end minus the previous end
    assert kernels[1]["gap_us"] == pytest.approx((0.5 - 1.0) / 2)  # negative: it started early
    assert kernels[2]["marginal_us"] == pytest.approx((1.5 + 2.0) / 2)
    # the marginal times add up to the step
    assert sum(k["marginal_us"] for k in kernels) == pytest.approx(step_us)
    assert by_kind["sgl_fp8 GEMM"] == pytest.approx(9.25)
    with pytest.raises(SystemExit):
        prof.step_statistics(records[:3] + [(100.0, 102.0, "norm"), (101.0, 110.0, "other"), (110.5, 112.0, "copy")], 2)


def test_kernel_records_reads_kernels_memcpys_and_memsets(tmp_path):
    prof = load_tool("e2e_kernel_profile")
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "b", "ts": 5.0, "dur": 1.0},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 0.0, "dur": 9.0},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 2.0, "dur": 0.5},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset", "ts": 7.0},
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 1.0},
    ]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    assert prof.kernel_records(prof.trace_events(str(path))) == [(2.0, 2.5, "Memcpy DtoD"), (5.0, 6.0, "b"), (7.0, 7.0, "Memset")]


def test_sequence_items():
    seq = load_tool("sequence_profile")
    assert seq.parse_sequence("copy, 4096x4096:8/512@b,flush,1024X4096:1") == [
        ("copy",), ("gemm", 4096, 4096, 8, 512, "b"), ("flush",), ("gemm", 1024, 4096, 1, None, "")]
    with pytest.raises(ValueError):
        seq.parse_sequence("4096x4096")


def _bench(fused, peer):
    rows = []
    for (n, k, m), us in fused.items():
        rows.append(dict(N=n, K=k, M=m, scale="fp32", fused_us=us, floor_us=2.0,
                         peers={"quant+scaled_mm(cuBLASLt)": peer}))
    return dict(rows=rows)


def test_binary_ab_report_ratios(tmp_path):
    """Version B is 0.9x of A at M = 1 in both rounds and 1.2x at M = 32; A drifts between rounds."""
    a1 = {(4096, 2048, 1): 5.0, (4096, 2048, 32): 10.0}
    a2 = {key: us * 1.1 for key, us in a1.items()}
    b1 = {(4096, 2048, 1): 4.5, (4096, 2048, 32): 12.0}
    b2 = {key: us * 1.1 for key, us in b1.items()}
    for name, data, peer in (("bench_A_r1", a1, 20.0), ("bench_A_r2", a2, 20.0),
                             ("bench_B_r1", b1, 20.0), ("bench_B_r2", b2, 21.0)):
        (tmp_path / f"{name}.json").write_text(json.dumps(_bench(data, peer)))
    for version, fp8 in (("A", 1000.0), ("B", 950.0)):
        for r in (1, 2):
            (tmp_path / f"e2e_{version}_r{r}.json").write_text(json.dumps(
                dict(rows=[dict(batch=1, fp8_us=fp8, bf16_us=1000.0)])))
    out = subprocess.run([sys.executable, os.path.join(TOOLS, "binary_ab_report.py"), str(tmp_path), "A", "B"],
                         capture_output=True, text=True, check=True).stdout
    point_m1 = next(line for line in out.splitlines() if line.split()[:3] == ["4096x2048", "1", "fp32"])
    assert point_m1.split()[3:] == ["5.00", "5.50", "0.900", "0.900"]
    point_m32 = next(line for line in out.splitlines() if line.split()[:3] == ["4096x2048", "32", "fp32"])
    assert point_m32.split()[5:] == ["1.200", "1.200"]
    assert "fp32 M<=4 0.900" in out and "fp32 M=32 1.200" in out
    assert "round 2: B / A of the scaled_mm peer, geometric mean 1.050" in out
    # floor/fused geometric mean of A's first round: sqrt(2/5 * 2/10) = 0.283
    assert "A 0.283" in out
    assert "B batch 1: r1 950.0/1000.0 = 0.9500, r2 950.0/1000.0 = 0.9500; mean 0.9500" in out


def test_ncu_stall_regions(tmp_path):
    """A made-up source page: ncu's own lines first, six instructions, a QGMMA that did not run
    before one that did. Regions, sizes and sums are counted here by hand."""
    tool = load_tool("ncu_stall_regions")
    header = ['"Address"', '"Source"', '"Instructions Executed"', '"stall_no_inst"', '"stall_wait"',
              '"stall_no_inst (Not Issued)"']
    rows = [
        ("0x1000", "      LDC R1, c[0x0][0x28]", "64", "3", "1", "9"),
        ("0x1010", "      ACQBULK", "64", "0", "2", "0"),
        ("0x1020", "  @P0 BRA 0x1040", "64", "1", "0", "0"),
        ("0x1030", "      QGMMA.64x8x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT", "0", "0", "0", "0"),
        ("0x1040", "      QGMMA.64x8x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT", "32", "5", "4", "0"),
        ("0x1050", "      EXIT", "1,024", "0", "0", "0"),
    ]
    text = "==PROF== Connected\n\"Kernel Name\",\"k\",\n" + ",".join(header) + "\n"
    text += "\n".join(",".join(f'"{v}"' for v in r) for r in rows) + "\n"
    path = tmp_path / "source.csv"
    path.write_text(text)
    insts = tool.instructions(tool.read_source_page(str(path)))
    assert [i[0] for i in insts] == [0, 16, 32, 48, 64, 80]
    assert insts[2][1] == "BRA" and insts[5][2] == 1024  # the predicate skipped; "1,024" read as 1024
    names = [(name, b, e) for name, b, e in tool.regions(insts)]
    assert names == [("entry .. ACQBULK", 0, 16), ("ACQBULK .. first wgmma", 16, 64), ("first wgmma .. end", 64, 96)]
    middle = tool.region_summary(insts, 16, 64)
    assert middle == dict(code_bytes=48, executed_bytes=32, warp_instructions=128, samples=3, no_inst=1)
    last = tool.region_summary(insts, 64, 96)
    assert last == dict(code_bytes=32, executed_bytes=32, warp_instructions=1056, samples=9, no_inst=5)
    runs = tool.executed_runs(insts)
    assert [(b, e) for b, e, *_ in runs] == [(0, 48), (64, 96)]  # the QGMMA at 48 did not run
    assert runs[0][2:5] == (192, 7, 4)


def test_stream_ceiling_smem_read_variants_meet_the_consumer_kernels_conditions():
    """tools/stream_ceiling.py --smem-reads: every variant has its own name, and on the Qwen shapes
    (132 SMs) its partition is one the consumer kernels take (stream_ceiling_tensor refuses others):
    CTAs of at most 4 or 5 tiles, K blocks a multiple of 4 a CTA (one per warpgroup a round)."""
    sc = load_tool("stream_ceiling")
    variants = sc.smem_read_variants()
    assert len({v.name for v in variants}) == len(variants) == 9
    assert sorted(v.params["consumer"] for v in variants) == list(range(9))
    for n, k in ((5120, 4096), (4608, 4096), (4096, 2048)):
        for v in variants:
            g = sc.tensor_geometry(v, n, k, 132)
            assert v.params["threads"] == 512 and g["max_tiles"] in (4, 5), (n, k, g)
            assert (k // 128) % (4 * v.params["k_split"]) == 0


def test_stream_ceiling_tensor_fold_matches_an_emulated_copy():
    """tools/stream_ceiling.py's tensor variant: the checksum the host expects equals one taken
    from an emulation of the kernel's copies (each box laid out as the 3-D map with the 128-byte
    swizzle writes it, zeros past K, then the XOR of the first word of each 16-byte piece of the
    box's first row). Small shapes with uneven row groups and a last box that passes K."""
    np = pytest.importorskip("numpy")
    sc = load_tool("stream_ceiling")
    rng = np.random.default_rng(5)
    for n, k, sms, params in ((112, 640, 6, {"k_split": 2, "box_blocks": 2}),   # 7 tiles on 3 groups
                              (80, 384, 4, {"k_split": 1, "box_blocks": 0}),    # the plan's box
                              (64, 1024, 8, {"k_split": 4, "box_blocks": 3})):  # boxes pass the slice
        v = sc.Variant("tensor", dict(params, early_half=0, cluster=0, evict_first=1, ctas_per_sm=1))
        g = sc.tensor_geometry(v, n, k, sms)
        w = rng.integers(0, 256, size=(n, k), dtype=np.uint8)
        words = w.reshape(-1).view("<u4")
        tiles, kblocks, s = n // 16, k // 128, params["k_split"]
        emulated = np.zeros(g["grid"], dtype=np.uint32)
        for group in range(g["groups"]):
            t0, t1 = group * tiles // g["groups"], (group + 1) * tiles // g["groups"]
            rows = (t1 - t0) * 16
            for rank in range(s):
                kb0, kb1 = rank * kblocks // s, (rank + 1) * kblocks // s
                acc = np.uint32(0)
                for c in range(-(-(kb1 - kb0) // g["box_blocks"])):
                    box = np.zeros((g["box_blocks"], rows, 128), dtype=np.uint8)
                    for b in range(g["box_blocks"]):
                        kb = kb0 + c * g["box_blocks"] + b
                        if kb >= kblocks:
                            continue
                        for r in range(rows):
                            src = w[t0 * 16 + r, kb * 128:(kb + 1) * 128].reshape(8, 16)
                            box[b, r] = src[[p ^ (r & 7) for p in range(8)]].reshape(-1)  # piece p at p ^ (r & 7)
                    first_row = box.reshape(-1)[:128].copy().view("<u4")
                    acc ^= np.bitwise_xor.reduce(first_row[0::4])
                emulated[group * s + rank] = acc
        assert (sc.expected_tensor_fold(v, words, n, k, sms) == emulated).all(), (n, k, params)
        assert g["grid"] == s * g["groups"] and g["early"] == g["chunks"]


def test_stream_ceiling_late_boxes_cut_the_held_back_copies():
    """tools/stream_ceiling.py --late-boxes (session 27): on the Qwen shapes the early boxes stay
    the plan's and the boxes after griddepcontrol.wait have 1 or 2 K blocks; the checksum the host
    expects is the XOR over those boxes' first rows (box starts listed here by hand)."""
    np = pytest.importorskip("numpy")
    sc = load_tool("stream_ceiling")
    variants = sc.late_box_variants()
    assert len({v.name for v in variants}) == len(variants) == 12
    v = next(v for v in variants if v.params["late_box_blocks"] == 1 and v.params["box_blocks"] == 0)
    g = sc.tensor_geometry(v, 5120, 4096, 132)  # 5 tiles, 16 blocks a CTA, plan boxes of 4 blocks
    assert (g["box_blocks"], g["early"], g["late_box_blocks"], g["chunks"]) == (4, 2, 1, 10)
    g = sc.tensor_geometry(v, 4096, 2048, 132)  # 4 tiles, 8 blocks: boxes of 4, one at entry
    assert (g["box_blocks"], g["early"], g["late_box_blocks"], g["chunks"]) == (4, 1, 1, 5)
    # 64 x 1024 on 2 SMs, K split 2: 4 tiles, 4 blocks a CTA; boxes of 2 blocks, one at entry,
    # then boxes of 1 block: starts 0, 2, 3 in each CTA's slice
    small = sc.Variant("tensor", {"k_split": 2, "box_blocks": 2, "early_half": 1, "cluster": 0, "evict_first": 1,
                                  "late_box_blocks": 1, "ctas_per_sm": 1})
    rng = np.random.default_rng(7)
    w = rng.integers(0, 256, size=(64, 1024), dtype=np.uint8)
    expected = np.zeros(2, dtype=np.uint32)
    for rank in range(2):
        for start in (0, 2, 3):
            kb = 4 * rank + start  # row 0 of the box is row 0 of the weight: its pieces unswizzled
            expected[rank] ^= np.bitwise_xor.reduce(w[0, kb * 128:(kb + 1) * 128].copy().view("<u4")[0::4])
    assert (sc.expected_tensor_fold(small, w.reshape(-1).view("<u4"), 64, 1024, 2) == expected).all()


def test_stream_ceiling_split_free_partitions():
    """tools/stream_ceiling.py --split-free (session 27): without a K split the CTAs hold whole K
    rows of at most 3 tiles (5120x4096: 107 of them, 4608x4096: 96) or one row group an SM, and
    every share fits the tool's 200 KB ring."""
    sc = load_tool("stream_ceiling")
    variants = sc.split_free_variants()
    assert len({v.name for v in variants}) == len(variants) == 4
    expected = {(5120, 4096): [(66, 5), (107, 3), (132, 3), (132, 3)],
                (4608, 4096): [(66, 5), (96, 3), (132, 3), (132, 3)],
                (4096, 2048): [(64, 4), (86, 3), (132, 2), (128, 2)]}
    for (n, k), rows in expected.items():
        for v, (groups, max_tiles) in zip(variants, rows):
            g = sc.tensor_geometry(v, n, k, 132)
            assert (g["groups"], g["max_tiles"]) == (groups, max_tiles), (n, k, v.name)
            ring = (g["early"] * g["box_blocks"] + (g["chunks"] - g["early"]) * g["late_box_blocks"]) * max_tiles * 2048
            assert ring <= 200 * 1024, (n, k, v.name, ring)


def test_clock_under_load_summarizes_the_busy_samples():
    """tools/clock_under_load.py: nvidia-smi's lines parsed (other lines dropped), the first and last
    fifth of the samples dropped as idle, medians and the set of event reasons of the rest."""
    clock = load_tool("clock_under_load")
    lines = ["1980, 3201, 80.0, 0x0000000000000000, 40"] * 2  # idle, before the work
    lines += ["1980, 3201, 400.0, 0x0000000000000000, 45", "1755, 3201, 420.0, 0x0000000000000004, 46",
              "1980, 3201, 410.0, 0x0000000000000000, 46", "1965, 3201, 430.0, 0x0000000000000000, 47",
              "1980, 3201, 405.0, 0x0000000000000000, 47", "1980, 3201, 415.0, 0x0000000000000000, 48"]
    lines += ["1980, 3201, 90.0, 0x0000000000000000, 44"] * 2  # idle, after
    text = "\n".join(lines[:5] + ["[Unknown Error]"] + lines[5:])
    rows = clock.parse_samples(text)
    assert len(rows) == 10 and rows[3] == ["1755", "3201", "420.0", "0x0000000000000004", "46"]
    s = clock.summarize(rows)
    # busy samples: rows 2..7 (10 // 5 = 2 dropped at each end)
    assert s["samples"] == 6
    assert s["sm_MHz_median"] == 1980.0 and s["sm_MHz_min"] == 1755.0
    assert s["power_W_median"] == 412.5  # median of 400, 420, 410, 430, 405, 415
    assert s["event_reasons"] == ["0x0000000000000000", "0x0000000000000004"]
    assert s["temperature_C"] == "48" and s["mem_MHz"] == "3201"


def test_sm90_plan_table_builds_and_prints_each_point(tmp_path):
    """tools/sm90_plan_table.cpp builds against the plan header and prints one line per shape and
    token count (a shape too small for 4 tiles a CTA says that no plan fits); a malformed list is
    a usage error."""
    import shutil
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("g++ not found: cannot build tools/sm90_plan_table.cpp")
    exe = tmp_path / "plans"
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", os.path.join(REPO, "kernels"),
                    os.path.join(TOOLS, "sm90_plan_table.cpp"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), "5120x4096,48x256", "1,16"], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["5120x4096 M=1", "5120x4096 M=16", "48x256 M=1", "48x256 M=16"]
    assert all("k_split" in line and "row groups" in line for line in lines[:2]), lines
    assert all("no 4-warpgroup wgmma plan fits" in line for line in lines[2:]), lines
    bad = subprocess.run([str(exe), "5120x", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_stream_ceiling_chain_variants_and_geometry():
    """tools/stream_ceiling.py --chain (session 29): every variant has its own name; on the Qwen
    shapes (132 SMs) a CTA's whole weight share fits the kernel's ring in 32 KB copies (5, 5 and 2
    of them), "half" requests the larger half at entry, and the output's 16-byte units over the
    grid cover M x N bf16 (worked out here by hand)."""
    sc = load_tool("stream_ceiling")
    variants = sc.chain_variants()
    assert len({v.name for v in variants}) == len(variants) == 24
    by_name = {v.name: v for v in variants}
    half = by_name["half at entry, rest once the loads are issued"]
    alone = by_name["activations alone (no weight)"]
    no_output = by_name["weight all at entry, no activations, 32 threads, no output"]
    for (n, k), chunks in (((5120, 4096), 5), ((4608, 4096), 5), ((4096, 2048), 2)):
        nbytes = sc.weight_bytes(n, k)
        share = -(-(nbytes // 16) // 132) * 16
        assert share <= chunks * 32 * 1024 <= 200 * 1024 and share > (chunks - 1) * 32 * 1024
        g = sc.chain_geometry(half, n, k, 16, nbytes, 132)
        assert (g["chunks"], g["early"], g["grid"]) == (chunks, (chunks + 1) // 2, 132)
        assert g["out_units"] * 16 * 132 >= 16 * n * 2 > (g["out_units"] - 1) * 16 * 132
        assert sc.chain_geometry(alone, n, k, 16, nbytes, 132)["chunks"] == 0
        assert sc.chain_geometry(no_output, n, k, 16, nbytes, 132)["out_units"] == 0
        for v in variants:  # the kernel's condition: a CTA's slice of a row is a power of two of 16-byte units
            slice_units = 2 * k // 16 // sc.chain_geometry(v, n, k, 1, nbytes, 132)["act_split"]
            assert slice_units & (slice_units - 1) == 0


def test_stream_ceiling_chain_mma_variants_and_stamp_summary():
    """tools/stream_ceiling.py --chain-mma (session 30): 24 variants with distinct names, wgmma only
    in 256-thread CTAs and in the counts the kernel has instances for; and the stamp summary on
    stamps built by hand: a 2 GHz SM clock, the phases' lengths, the releases' spread and period,
    the first launches left out, and the loads of streaming and idle CTAs told apart."""
    np = pytest.importorskip("numpy")
    sc = load_tool("stream_ceiling")
    variants = sc.chain_mma_variants()
    assert len({v.name for v in variants}) == len(variants) == 24
    paced = [v for v in variants if v.params["late_order"] == 3]
    assert [sc.chain_geometry(v, 5120, 4096, 1, sc.weight_bytes(5120, 4096), 132)["early"] for v in paced] == [1, 2, 2]
    for v in variants:
        p = v.params
        assert p["threads"] == 256 and p.get("mma_entry", 0) in (0, 1, 2, 4) and p.get("mma_tail", 0) in (0, 1)
        assert not p.get("mma_tail", 0) or p.get("mma_entry", 0) in (0, 2)  # the kernel's instances
    assert sum(1 for v in variants if v.params.get("stream_mod", 1) == 2) == 1
    launches, grid = 7, 4
    st = np.zeros((launches, grid, sc.CHAIN_STAMPS), dtype=np.int64)
    for i in range(launches):
        for b in range(grid):
            entry = 10_000 * i + 100 * b
            release = 10_000 * i + 3_000 + 50 * b           # spread over the grid: 150 ns
            loads = 400 if b % 2 == 0 else 1_000            # even CTAs' loads 0.4 us, odd 1.0 us
            landed = release + 2_500
            exit_ = landed + 700
            late_issued = release + 200 if b < 2 else 0     # only CTAs 0 and 1 have copies after the wait
            chunks = [release + 1_000 * (c + 1) if c < 2 or (c == 2 and b != 3) else 0 for c in range(8)]
            st[i, b] = [5_000_000, entry, release, release + loads, landed, exit_,
                        5_000_000 + 2 * (exit_ - entry), b, entry + 300, late_issued] + chunks  # 2000 MHz
    st[:sc.CHAIN_STAMP_SKIP, :, 3] += 99_000  # the skipped launches must not count
    summary = sc.summarize_chain_stamps(st, stream_mod=2)
    assert summary["sm_clock_mhz"] == pytest.approx(2000.0)
    assert summary["release_to_landed_us"] == pytest.approx(2.5)
    assert summary["landed_to_exit_us"] == pytest.approx(0.7)
    assert summary["release_to_exit_us"] == pytest.approx(3.2)
    assert summary["release_spread_us"] == pytest.approx(0.15)
    assert summary["release_to_next_release_us"] == pytest.approx(10.0)
    assert summary["early_issue_us"] == pytest.approx(0.3)
    assert summary["late_issue_us"] == pytest.approx(0.2)  # the CTAs without late copies left out
    assert summary["chunk_landed_us"] == pytest.approx([1.0, 2.0])  # chunk 2: not every CTA has one
    assert summary["activation_latency_us"] == pytest.approx(0.7)  # the median of 0.4 and 1.0
    assert summary["activation_latency_streaming_us"] == pytest.approx(0.4)
    assert summary["activation_latency_not_streaming_us"] == pytest.approx(1.0)
    assert "activation_latency_streaming_us" not in sc.summarize_chain_stamps(st)


def test_stream_ceiling_chain_consume_variants():
    """tools/stream_ceiling.py --chain-consume (session 32): 7 variants with distinct names, only in
    the combinations the kernel has instances for (consumption 1 or 2 x 16 wgmma a chunk, never with
    the bursts at entry or after the landing; 512 threads only with it); 16 m64n8k32 (64 rows x 32
    bytes of A each) read a 32 KB chunk exactly once, and split evenly among 2 or 4 warpgroups; every
    CTA's K slice of the activations a power of two of 16-byte units on the Qwen shapes; the fused
    configs request every copy at entry (field 3, tiles_per_block) and take out the activations and
    the epilogue (2 + 4)."""
    sc = load_tool("stream_ceiling")
    variants = sc.chain_consume_variants()
    assert len({v.name for v in variants}) == len(variants) == 7
    assert sorted(v.params.get("mma_consume", 0) for v in variants) == [0, 0, 1, 1, 1, 1, 2]
    for v in variants:
        p = v.params
        assert (p.get("mma_entry", 0), p.get("mma_tail", 0)) == (0, 0)
        assert p["threads"] == 256 or (p["threads"] == 512 and p["mma_consume"] in (1, 2))
        if p.get("mma_consume", 0):
            assert (16 * p["mma_consume"]) % (p["threads"] // 128) == 0
        for n, k in ((5120, 4096), (4608, 4096), (4096, 2048)):
            g = sc.chain_geometry(v, n, k, 32, sc.weight_bytes(n, k), 132)
            assert g["chunks"] in (2, 5)  # the consuming kernel's compile-time chunk counts
            slice_units = 2 * k // 16 // g["act_split"]
            assert slice_units & (slice_units - 1) == 0
    assert 16 * 64 * 32 == sc.CHAIN_CHUNK
    configs = dict(sc.CHAIN_CONSUME_FUSED)
    assert all(c[2] == 64 and c[0] == c[1] == c[3] == 0 for c in configs.values())
    assert sorted(c[4] for c in configs.values()) == [0, 2 | 4]


def test_stream_ceiling_chain_timed_variants():
    """tools/stream_ceiling.py --chain-timed (session 33): distinct names; the clocked variants only
    where the kernel has a producer-warp instance (256 threads without a consumer, or 512 consuming
    the share once), each with a positive pace and, but for the one that requests every copy at entry,
    at least one copy left to request on the clock on the large shapes; the unclocked references
    carry no pace (the launcher refuses one); the fused reference is the stream and the MMAs alone
    with every copy at entry."""
    sc = load_tool("stream_ceiling")
    variants = sc.chain_timed_variants()
    assert len({v.name for v in variants}) == len(variants)
    timed = [v for v in variants if v.params["late_order"] == sc.CHAIN_TIMED]
    # (+ 2: every copy at entry from the producer warp, nothing left for its clock, with and without the consumer)
    assert len(timed) == len(sc.CHAIN_TIMED_PACES) + len(sc.CHAIN_TIMED_CONSUME_PACES) + 2
    for v in variants:
        p = v.params
        if p["late_order"] != sc.CHAIN_TIMED:
            assert "pace_cycles" not in p
            continue
        assert p["pace_cycles"] > 0 and ("cycles" in v.name or p["early"] == "all")
        assert (p["threads"], p.get("mma_consume", 0)) in ((256, 0), (512, 1))
        for n, k in ((5120, 4096), (4608, 4096), (4096, 2048)):
            g = sc.chain_geometry(v, n, k, 16, sc.weight_bytes(n, k), 132)
            assert 1 <= g["early"] <= g["chunks"]
            if (n, k) != (4096, 2048) and p["early"] != "all":
                assert g["early"] < g["chunks"]  # some copies on the clock
            if p.get("mma_consume", 0):
                assert g["chunks"] in (2, 5)  # the consuming instances' compile-time chunk counts
    assert {v.params.get("mma_consume", 0) for v in timed} == {0, 1}
    assert all(c[2] == 64 and c[4] == 6 for _, c in sc.CHAIN_TIMED_FUSED)


def test_stream_ceiling_weight_pool_kinds():
    """tools/stream_ceiling.py's weight pools (session 32, --pool): "e4m3" bytes decode to finite
    e4m3 values whose spread is that of 0.5 x a normal draw (bench's weights), with no NaN and not
    all zero, across piece boundaries of the draw; "random" bytes cover every byte value (NaNs
    included); any other kind is refused."""
    torch = pytest.importorskip("torch")
    sc = load_tool("stream_ceiling")
    g = torch.Generator().manual_seed(3)
    n = (1 << 26) + 4096  # past one piece of the draw
    e4m3 = sc.weight_pool(n, "e4m3", g, "cpu")
    assert e4m3.dtype == torch.uint8 and e4m3.numel() == n
    values = e4m3.view(torch.float8_e4m3fn).float()
    assert torch.isfinite(values).all() and (e4m3 != 0).any()
    assert not ((e4m3 & 0x7F) == 0x7F).any()  # e4m3's NaN encodings
    assert 0.45 < values.std().item() < 0.55 and abs(values.mean().item()) < 0.01
    assert values[1 << 26:].std().item() > 0.4  # the last piece is drawn too
    random = sc.weight_pool(1 << 16, "random", g, "cpu")
    assert torch.unique(random).numel() == 256
    with pytest.raises(ValueError):
        sc.weight_pool(16, "zeros", g, "cpu")


def test_stream_ceiling_chain_activation_fold_matches_the_kernels_walk():
    """The chain kernel's activation checksum as the host expects it equals one taken by walking
    the kernel's own indexing: thread t of 256 loads slice units t, t + 256, ... (unit u is row
    u >> shift, unit u & (slice - 1) of the row's K slice b % split), XORing every 32-bit word."""
    np = pytest.importorskip("numpy")
    sc = load_tool("stream_ceiling")
    rng = np.random.default_rng(11)
    for m, k, split, grid in ((1, 256, 2, 3), (5, 1024, 4, 6), (3, 512, 8, 9)):
        act = rng.integers(0, 2 ** 16, size=(m, k), dtype=np.uint16)
        words = act.reshape(-1).view("<u4")
        row_units = 2 * k // 16
        slice_units = row_units // split
        shift = slice_units.bit_length() - 1
        units = act.reshape(-1).view("<u4").reshape(-1, 4)  # 16-byte units, row-major
        walked = np.zeros(grid, dtype=np.uint32)
        for b in range(grid):
            first = (b % split) * slice_units
            for t in range(256):
                for u in range(t, m * slice_units, 256):
                    unit = units[(u >> shift) * row_units + first + (u & (slice_units - 1))]
                    walked[b] ^= unit[0] ^ unit[1] ^ unit[2] ^ unit[3]
        assert (sc.expected_act_fold(words, m, k, grid, split) == walked).all(), (m, k, split)


def _mma_m16n8k16(a_frag, b_frag):
    """mma.sync m16n8k16 from per-lane fragments, as the PTX ISA lays them out: lane (g = lane / 4,
    t = lane % 4) holds A[g][2t, 2t+1] (a0), A[g+8][2t, 2t+1] (a1), A[g][2t+8, 2t+9] (a2), A[g+8][2t+8, 2t+9]
    (a3) and B[2t, 2t+1][g] (b0), B[2t+8, 2t+9][g] (b1); returns the 16 x 8 product."""
    import numpy as np
    a, b = np.full((16, 16), np.nan), np.full((16, 8), np.nan)
    for lane in range(32):
        g, t = divmod(lane, 4)
        a0, a1, a2, a3 = a_frag[lane]
        b0, b1 = b_frag[lane]
        a[g, 2 * t:2 * t + 2], a[g + 8, 2 * t:2 * t + 2] = a0, a1
        a[g, 2 * t + 8:2 * t + 10], a[g + 8, 2 * t + 8:2 * t + 10] = a2, a3
        b[2 * t:2 * t + 2, g], b[2 * t + 8:2 * t + 10, g] = b0, b1
    assert not np.isnan(a).any() and not np.isnan(b).any(), "a lane's fragment left an element unset"
    return a @ b


def test_regmma_probe_k_order_pairs_each_weight_byte_with_its_activation():
    """tools/regmma_probe.cu's K order, emulated lane by lane: lane (g, t) holds the 16 contiguous bytes at
    K offset 16 t of a 64-K chunk and mma s takes its bytes 4s, 4s+1 as the pair k {2t, 2t+1} and 4s+2,
    4s+3 as {2t+8, 2t+9}, for the weight and the activations alike. Summed over s = 0..3, both orientations
    (16 weight rows as A, tokens as B; 8 weight rows as B, 16 tokens as A) give W X^T of the chunk."""
    import numpy as np
    rng = np.random.default_rng(35)
    w, x = rng.standard_normal((16, 64)), rng.standard_normal((16, 64))  # 16 weight rows, 16 tokens
    piece = lambda row, t, s, half: row[16 * t + 4 * s + 2 * half:16 * t + 4 * s + 2 * half + 2]
    rows_as_a = np.zeros((16, 8))
    tokens_as_a = np.zeros((16, 8))
    for s in range(4):
        lanes = [divmod(lane, 4) for lane in range(32)]
        rows_as_a += _mma_m16n8k16(
            [(piece(w[g], t, s, 0), piece(w[g + 8], t, s, 0), piece(w[g], t, s, 1), piece(w[g + 8], t, s, 1))
             for g, t in lanes],
            [(piece(x[g], t, s, 0), piece(x[g], t, s, 1)) for g, t in lanes])
        tokens_as_a += _mma_m16n8k16(
            [(piece(x[g], t, s, 0), piece(x[g + 8], t, s, 0), piece(x[g], t, s, 1), piece(x[g + 8], t, s, 1))
             for g, t in lanes],
            [(piece(w[g], t, s, 0), piece(w[g], t, s, 1)) for g, t in lanes])
    np.testing.assert_allclose(rows_as_a, w @ x[:8].T, rtol=1e-12, atol=1e-12)  # [row][token]
    np.testing.assert_allclose(tokens_as_a, x @ w[:8].T, rtol=1e-12, atol=1e-12)  # [token][row]


def test_regmma_probe_reference_is_the_spec_block_sum():
    """The probe's float64 check model (reference) against SPEC 3.4 written out block by block, and its
    activations: e4m3, finite, spread from subnormals (below 2^-6) to near 448."""
    import torch
    probe = load_tool("regmma_probe")
    g = torch.Generator().manual_seed(7)
    m, n, k = 3, 136, 256  # n not a multiple of 128: the last scale row covers 8 rows
    q, xs = probe.activations(m, k, g, "cpu")
    assert q.dtype == torch.float8_e4m3fn and xs.shape == (m, k // 128) and bool((xs > 0).all())
    qf = q.float()
    assert bool(torch.isfinite(qf).all())
    mags = qf.abs()[qf != 0]
    assert float(mags.min()) < 2 ** -6 and float(mags.max()) >= 256
    w = (torch.randn(n, k, generator=g) * 0.5).to(torch.float8_e4m3fn)
    ws = torch.rand(2, k // 128, generator=g) + 0.5
    want = torch.zeros(m, n, dtype=torch.float64)
    for i in range(m):
        for j in range(n):
            for kb in range(k // 128):
                block = slice(128 * kb, 128 * kb + 128)
                dot = (q[i, block].double() * w[j, block].double()).sum()
                want[i, j] += float(xs[i, kb]) * float(ws[j // 128, kb]) * dot
    torch.testing.assert_close(probe.reference(q, xs, w, ws), want, rtol=1e-12, atol=1e-12)
    errs = probe.row_errors(want.to(torch.bfloat16), want)
    assert max(errs) <= probe.TOLERANCE and min(errs) > 0  # the bf16 cast alone: nonzero, within SPEC


def test_regmma_probe_builds_for_sm90a():
    """tools/regmma_probe.cu compiles for sm_90a where nvcc exists (CI has it), so a probe that rots is
    caught on the CPU machine."""
    import shutil
    if not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")):
        pytest.skip("nvcc not found: cannot build tools/regmma_probe.cu")
    done = subprocess.run([sys.executable, os.path.join(TOOLS, "regmma_probe.py"), "--compile-only"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_regmma_probe_load_pattern_diagnostics_read_the_fragment_patterns_bytes():
    """The loads-only diagnostics of tools/regmma_probe.cu in other patterns read exactly the bytes the
    fragment pattern reads, each once, with the same number of loads a lane: kContiguous (load j of a warp =
    the 512 bytes at offset 512 j of its rows x K-slice region, row-major) over the whole slice, and kRows4
    (load i of block b: rows 4i .. 4i + 3, bytes 128 b + 16 (lane % 8) of row 4i + lane / 8) block by block.
    Fragment pattern: 16-row CTAs, lane (g, t) rows g and g + 8 at 128 b + 64 c + 16 t; 8-row CTAs, row g.
    K slices of 2 and 4 blocks (16-row) and 4 and 8 blocks (8-row)."""
    def contiguous(loads, slice_bytes):
        return [((512 * j + 16 * lane) // slice_bytes, (512 * j + 16 * lane) % slice_bytes + i)
                for j in range(loads) for lane in range(32) for i in range(16)]

    def rows4(block, loads):
        return [(4 * j + lane // 8, 128 * block + 16 * (lane % 8) + i)
                for j in range(loads) for lane in range(32) for i in range(16)]

    def same_bytes_once(a, b):
        return len(a) == len(set(a)) == len(b) == len(set(b)) and set(a) == set(b)

    for k_blocks in (2, 4):  # 16-row kernel: 4 loads a block
        frag = lambda blocks: [(row, 128 * b + 64 * c + 16 * (lane % 4) + i)
                               for b in blocks for c in range(2) for lane in range(32)
                               for row in (lane // 4, lane // 4 + 8) for i in range(16)]
        assert same_bytes_once(contiguous(4 * k_blocks, 128 * k_blocks), frag(range(k_blocks)))
        for b in range(k_blocks):
            assert same_bytes_once(rows4(b, 4), frag([b]))
    for k_blocks in (4, 8):  # 8-row kernel: 2 loads a block
        frag = lambda blocks: [(lane // 4, 128 * b + 64 * c + 16 * (lane % 4) + i)
                               for b in blocks for c in range(2) for lane in range(32) for i in range(16)]
        assert same_bytes_once(contiguous(2 * k_blocks, 128 * k_blocks), frag(range(k_blocks)))
        for b in range(k_blocks):
            assert same_bytes_once(rows4(b, 2), frag([b]))


def test_regmma_probe_transpose_gives_each_lane_its_fragment_pieces_without_bank_conflicts():
    """tools/regmma_probe.cu's kTranspose: a warp stores piece i of each lane (row 4i + lane / 8, 16-byte
    unit lane % 8 of a 128-byte K block) at unit (lane % 8) XOR ((row & 1) << 2) of its row's 128 bytes, and
    lane (g, t) reads rows g and g + 8 at unit (4c + t) XOR ((g & 1) << 2): it gets the fragment pattern's
    pieces (row g / g + 8, unit 4c + t), and every 8-lane phase of a 16-byte store or load touches 8
    different 16-byte bank groups."""
    stored = {}
    for i in range(4):
        phase_groups = {q: set() for q in range(4)}
        for lane in range(32):
            r, u = 4 * i + lane // 8, lane % 8
            address = r * 128 + (u ^ ((r & 1) << 2)) * 16
            assert address not in stored
            stored[address] = (r, u)
            phase_groups[lane // 8].add((address // 16) % 8)
        assert all(len(groups) == 8 for groups in phase_groups.values()), (i, phase_groups)
    assert len(stored) == 128  # 16 rows x 8 units: the whole 2 KB block, each unit once
    for c in range(2):
        for rows in ((lambda g: g), (lambda g: g + 8)):
            phase_groups = {q: set() for q in range(4)}
            for lane in range(32):
                g, t = divmod(lane, 4)
                unit = (4 * c + t) ^ ((g & 1) << 2)
                address = rows(g) * 128 + unit * 16
                assert stored[address] == (rows(g), 4 * c + t)
                phase_groups[lane // 8].add((address // 16) % 8)
            assert all(len(groups) == 8 for groups in phase_groups.values()), (c, phase_groups)


def test_regmma_probe_staggered_and_rotated_reads_cover_each_share_once():
    """Session 36's address staggers in tools/regmma_probe.cu read each 8-row CTA's whole share, each 16-byte
    unit once: bare_rows_kernel's kLinearStaggered / kStripsStaggered (offset + 512 b mod 8 k) and
    kLinearRotatedBlocks (offset + 128 (b mod 32) mod 8 k), by 256 threads (8 warps); and kRotateK's K blocks
    (warp w's step i takes block (w K_BLOCKS + i + b) mod (k / 128)) give each CTA every K block once, and the
    rotated CTAs start at different offsets."""
    for k in (2048, 4096):
        share, threads, warps = 8 * k, 256, 8
        loads = share // 16 // threads
        units = set(range(share // 16))
        for b in (0, 1, 7, 31, 63, 64, 639):
            linear = [(j * threads + i) * 16 for j in range(loads) for i in range(threads)]
            strips = [(lane // 4) * k + w * (k // warps) + 64 * j + 16 * (lane % 4)
                      for j in range(loads) for w in range(warps) for lane in range(32)]
            assert sorted(o // 16 for o in strips) == sorted(units)  # the unstaggered strips cover the share too
            for offsets in ([(o + 512 * b) % share for o in linear], [(o + 512 * b) % share for o in strips],
                            [(o + 128 * (b % 32)) % share for o in linear]):
                assert all(o % 16 == 0 for o in offsets)
                assert len(offsets) == len(units) and {o // 16 for o in offsets} == units, (k, b)
        # session 37: strips rotated within their rows (kStripsRotatedInRows128 / 512), by 128 and 256 threads;
        # by 128 threads the 128 B one reads exactly the rotated 8-row GEMM's (kRotateK) units
        k_blocks = k // 512  # the 8-row kernel's blocks a warp (4 warps)
        for threads in (128, 256):
            warps, loads = threads // 32, share // 16 // threads
            for b in (0, 1, 7, 31, 33, 639):
                for step in (128, 512):
                    offsets = []
                    for j in range(loads):
                        for w in range(warps):
                            for lane in range(32):
                                column = w * (k // warps) + 64 * j + 16 * (lane % 4)
                                offsets.append((lane // 4) * k + (column + step * b) % k)
                                assert offsets[-1] // k == lane // 4  # every lane stays in its row
                    assert {o // 16 for o in offsets} == units and len(offsets) == len(units), (k, threads, b, step)
                    if threads == 128 and step == 128:
                        gemm = [(lane // 4) * k + 128 * ((w * k_blocks + i + b % (4 * k_blocks)) % (4 * k_blocks))
                                + 64 * c + 16 * (lane % 4)
                                for i in range(k_blocks) for c in range(2) for w in range(4) for lane in range(32)]
                        assert offsets == gemm, (k, b)  # the same loads in the same order (j = 2 i + c)
        for step in (1, 4):  # kRotateK, and kRotateK | kRotateBy4 (rotation_blocks: step b mod k / 128)
            starts = set()
            for b in range(2 * k // 128):
                rotation = (step * b) % (4 * k_blocks)
                blocks = [(w * k_blocks + i + rotation) % (4 * k_blocks) for w in range(4) for i in range(k_blocks)]
                assert sorted(blocks) == list(range(k // 128)), (k, b)
                starts.add(blocks[0])
            assert len(starts) == k // 128 // step  # every (step-th) K block is some CTA's first


def test_stream_ceiling_rotated_boxes_request_each_box_once_in_its_half():
    """tools/stream_ceiling.cu's share.rotate (session 36): a CTA of row group `group` requests its early boxes
    [0, early) and then its late ones [early, chunks) each from begin + group mod (their count), wrapping at
    the end: every box once, the early ones before griddepcontrol.wait, and CTAs of consecutive groups start
    at different boxes. The --plan-copies variants that ask for it name it."""
    def issue_range(begin, end, group, rotate):
        if begin >= end:
            return []
        c, order = begin + (group % (end - begin) if rotate else 0), []
        for _ in range(begin, end):
            order.append(c)
            c = begin if c + 1 == end else c + 1
        return order

    for chunks in (1, 2, 5, 16):
        for early in sorted({0, 1, chunks // 2, chunks}):
            firsts = set()
            for group in range(40):
                before = issue_range(0, early, group, True)
                after = issue_range(early, chunks, group, True)
                assert sorted(before) == list(range(early)) and sorted(after) == list(range(early, chunks))
                assert issue_range(0, early, group, False) == list(range(early))
                firsts.add((before or after)[0])
            assert len(firsts) == (early if early else chunks)
    names = [v.name for v in load_tool("stream_ceiling").plan_copy_variants() if v.params.get("rotate")]
    assert len(names) == 3 and all(name.endswith("boxes rotated by CTA") for name in names)


def test_regmma_probe_16row_rotation_stages_each_activation_unit_once():
    """kRotateK in tools/regmma_probe.cu's 16-row kernel (session 36): warp w (of 8) takes K blocks
    (w K_BLOCKS + b + CTA) mod (k / 128), b < K_BLOCKS = k / 1024, and stages its blocks' activations as
    16-byte units block_of(i / (8 m)) * 8 m + i % (8 m) of the [k/64][m][64] e4m3 tensor: over the 8 warps
    every unit once, and each warp's units are the two 64-K chunks of each of its blocks."""
    for k in (2048, 4096):
        k_blocks, all_blocks = k // 1024, k // 128
        for m in (1, 3, 8, 16):
            per_block = 2 * m * 4
            for cta in (0, 1, 5, all_blocks - 1, 321):
                units = []
                for warp in range(8):
                    blocks = [(warp * k_blocks + b + cta % all_blocks) % all_blocks for b in range(k_blocks)]
                    mine = [blocks[i // per_block] * per_block + i % per_block for i in range(k_blocks * per_block)]
                    # unit u of [k/64][m][64] lies in chunk u // (4 m): the chunks 2 kb and 2 kb + 1 of its blocks
                    assert {u // (4 * m) for u in mine} == {2 * kb + c for kb in blocks for c in (0, 1)}
                    units += mine
                assert sorted(units) == list(range(all_blocks * per_block)), (k, m, cta)


def test_regmma_probe_quantize_passes_cover_each_group_once_in_the_staged_layout():
    """kQuantize in tools/regmma_probe.cu's 16-row kernel (session 37): pass p's quad g takes pair 8 p + g
    (the warp's block pair / m, token pair % m) while pair < m K_BLOCKS; lane t of the quad quantizes the 32
    values at 32 t of the 128-group and stores them at chunk 2 kb + t / 2, byte 32 (t % 2) of the token's 64 in
    the [k/64][m][64] layout: over the passes every (token, K) value of the warp's slice lands once, at the byte
    the e4m3 input would have had (chunk k / 64, byte k % 64), and every group's scale once; the same for
    kQuantFast's 8 lanes a pair."""
    def staged(lanes, k_blocks, m, k0_block):
        """kQuantize (lanes = 4) or kQuantFast (8): pass p's lane run r takes pair 32 p / lanes + r; lane i of
        it quantizes the 128 / lanes values at 128 i / lanes and stores them at chunk 2 kb + (that offset) / 64,
        byte (that offset) % 64 (the kernel's 2 kb + t / 2, 32 (t % 2) and 2 kb + l8 / 4, 16 (l8 % 4))."""
        per_lane, per_pass = 128 // lanes, 32 // lanes
        written, scales = {}, []
        for p in range((m * k_blocks + per_pass - 1) // per_pass):
            for r in range(per_pass):
                pair = per_pass * p + r
                if pair >= m * k_blocks:
                    continue
                bl, tok = divmod(pair, m)
                kb = k0_block + bl
                scales.append((tok, kb))
                for i in range(lanes):
                    offset = per_lane * i
                    for j in range(per_lane):
                        address = ((2 * kb + offset // 64) * m + tok) * 64 + offset % 64 + j
                        assert address not in written
                        written[address] = (tok, kb * 128 + offset + j)  # the value lane i quantized
        return written, scales

    for k_blocks in (2, 4):
        for m in (1, 3, 8, 16):
            for k0_block in (0, 5 * k_blocks):  # warp 0 and warp 5's slices
                written, scales = staged(4, k_blocks, m, k0_block)
                want = {((kk // 64) * m + tok) * 64 + kk % 64: (tok, kk)
                        for tok in range(m) for kk in range(k0_block * 128, (k0_block + k_blocks) * 128)}
                assert written == want, (k_blocks, m)
                assert sorted(scales) == sorted((tok, k0_block + b) for tok in range(m) for b in range(k_blocks))
                fast, fast_scales = staged(8, k_blocks, m, k0_block)
                assert fast == want and sorted(fast_scales) == sorted(scales), (k_blocks, m)


def test_regmma_probe_cluster_quantization_covers_each_group_once():
    """kQuantCluster in tools/regmma_probe.cu (session 37): in a cluster of 8 CTAs, CTA rank r's quad
    q = 8 warp + g quantizes the pair (token q % m, block r bpr + q / m) while q < m bpr (bpr = k / 1024 blocks
    a rank) and stores it into all 8 CTAs: over the ranks every (token, K block) group once, for every m the
    probe runs (1-16), so one pass a CTA suffices (m bpr <= 64 quads)."""
    for k in (2048, 4096):
        kblocks = k // 128
        bpr = kblocks // 8
        for m in range(1, 17):
            assert m * bpr <= 64
            groups = []
            for rank in range(8):
                for quad in range(64):
                    if quad < m * bpr:
                        groups.append((quad % m, rank * bpr + quad // m))
            assert sorted(groups) == sorted((tok, kb) for tok in range(m) for kb in range(kblocks)), (k, m)
