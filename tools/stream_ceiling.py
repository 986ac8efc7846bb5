"""How fast can *any* kernel on this GPU stream a decode GEMM's weight bytes, cold, read once?

`python -m sglang_fp8ext bench` compares the fused GEMM with a bandwidth floor: the op's bytes
over the device-to-device copy bandwidth. A copy kernel is not what the fused kernel does,
though: the fused kernel only *reads* its weight, in one short launch of a few microseconds,
back to back with its neighbours under programmatic dependent launch (PDL). This tool measures
the ceiling that matters: read-only streaming kernels (tools/stream_ceiling.cu), timed exactly the
way bench times the fused kernel (median us per launch over CUDA-graph replays of one launch per
rotated, cold weight copy), over the weight + fp32 scale bytes of each Qwen3.5 TP4 shape.

    floor/us close to 1: plain reading reaches copy bandwidth at this size, so the floor is fair;
    floor/us well below 1: no kernel reaches the floor at this size (launch, ramp-up and tail
    cost), and the best figure here is the realistic target for the fused kernel.

Usage (on the GPU machine, repo root on PYTHONPATH so `sglang_fp8ext.bench` imports):
    python tools/stream_ceiling.py --out DIR [--quick | --copy-sizes | --ldg-residency | --plan-copies | --smem-reads | --late-boxes |
        --split-free | --chain | --chain-mma | --chain-consume | --chain-timed] [--pool e4m3] [--replays 20]

--plan-copies (session 18) asks why the fused kernel's weight copies alone (its diagnostic flag 7)
reach only ~0.86 of the floor where a bulk-copy kernel reaches ~0.98: `tensor` variants copy the
weight exactly as the fused wgmma ring kernel does (its K-split partition, its 3-D tensor map and
box, evict_first), with and without a cluster launch, every box at entry or half of them after
griddepcontrol.wait; next to them the bulk references and, where the extension is built, the fused
op itself and its copies-alone variant, all in the same run.
--smem-reads (session 23) asks what reading the landed weight from shared memory costs the stream
and whether the way it is read matters: the fused kernel's copies with its 4 warpgroups reading
each block as it lands, as its MMAs do (windows), through one window, as wgmma's B operand (the
weight read once, no A bytes), or through one window and the fifth tile by mma.sync
(smem_read_variants).
--late-boxes (session 27) cuts the boxes requested after griddepcontrol.wait into boxes of 1 or 2
K blocks, with and without the MMAs (late_box_variants): does less MMA work follow the last landing?
--split-free (session 27) times the copies of plans without a K split (split_free_variants).
--ldg-residency (session 36) times ldg kernels as they are and with their CTAs an SM capped, by unused
shared memory, at the grid's: capped, the next launch's CTAs cannot start on an SM (PDL) before this
launch's leave it (ldg_residency_variants).
--chain (session 29) asks what a one-launch GEMM cannot avoid besides its weight bytes, with no
arithmetic: after griddepcontrol.wait every CTA reads its activations (M rows of half of K, bf16,
from L2) and writes its share of the M x N output once those and its whole weight share are in
(chain_variants: the weight requested all at entry, half at entry and the rest before, during or
after the activation loads, none at entry; K/2, K/4 or K/8 of the activations a CTA; the
activations alone, or neither; SM cycles of work after the last landing), at M = 1, 4, 8, 16, 32
beside the fused op and its diagnostic flags 1, 5 and 7, against bench's floor (weight, scales,
activations and output bytes).
--chain-mma (session 30) adds the fused kernel's tensor work to the chain without its data (8-32
wgmma a warpgroup at entry, before griddepcontrol.wait, or 8 after the last landing), more orders of
the copies (paced by a second thread; the activation loads ahead of every copy) and only every second
CTA streaming, and records thread 0's SM clock and global-timer stamps in every CTA of every launch
(chain_mma_variants, summarize_chain_stamps): does tensor work cost a launch more than its issue time,
how long do the first activation loads take with the share in flight, part of it, or none, and when
does each chunk land? `--after copy` puts a copy kernel that writes the activations before every
launch (a decode step's order).
--chain-consume (session 32) multiplies the chain's share as it lands: once the activations are in,
the warpgroups (2 or 4) wait for each 32 KB chunk in turn and issue 16 (every weight byte read once
as wgmma's A) or 32 m64n8k32 on it among them (chain_consume_variants), whole share at entry or the
fused kernel's order, K/2 or K/4 of the activations a CTA, at the 15 bench points, beside the fused
op with every copy at entry and with only its stream and MMAs (flag 6): how close can a design that
consumes its share as it lands get, before quantization, block scales and a K split's exchange?
(`--after copy` too; `--pool e4m3` fills the weight copies with e4m3 values as bench's weights
instead of random bytes, for this mode, --chain-mma and --chain-timed.)
--chain-timed (session 33) has a producer warp of its own request the copies on a clock: 1-3 at entry,
then one every 1000-2000 SM cycles (about a CTA's fair share of the copy rate), with and without the
consumer (read once, 512 threads), beside every copy at entry from thread 0 and from the producer
warp and the fused op's stream and MMAs (chain_timed_variants): do copies requested on a clock land
spread out, let the activation loads through sooner, and shorten what follows the last landing?
Writes DIR/stream_ceiling.json and prints one table per shape. Without a CUDA device it says
so and exits 0 (`--compile-only` still builds and loads the kernels, which needs no GPU).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CU_SOURCE = os.path.join(REPO, "tools", "stream_ceiling.cu")
if REPO not in sys.path:  # `sglang_fp8ext.bench` without PYTHONPATH too
    sys.path.insert(0, REPO)

KIB = 1024
MIN_COPIES = 24  # as bench: at least 24 rotated copies ...
L2_MULTIPLE = 3  # ... and at least 3x L2 in total, so every launch reads cold weights
DEFAULT_L2 = 50 * 1000 * 1000
HANG_TIMEOUT_S = 20.0  # an eager check launch that has not finished by then is a hang


def write_result(out_dir: str, name: str, result: dict) -> None:
    """A probe's results as JSON under out_dir (which exists), and where they went."""
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {path}")


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- variants ----------------------------------------------------------------------------------


@dataclass
class Variant:
    kind: str  # "ldg", "bulk" or "tensor"
    params: Dict[str, int]
    pdl: int = 1

    @property
    def name(self) -> str:
        p = self.params
        if self.kind == "ldg":
            text = f"ldg D={p['depth']} ctas/SM={p['ctas_per_sm']}"
            if p.get("cap", 0):
                text += f", capped at {p['cap']} an SM"
        elif self.kind == "tensor":
            box = "plan box" if p["box_blocks"] == 0 else f"box {p['box_blocks']} blocks"
            if p.get("cta_tiles", 0):
                box += f", CTAs of {p['cta_tiles']} tiles" if p["cta_tiles"] > 0 else ", a row group an SM"
            if p.get("late_box_blocks", 0):
                box += f", late boxes {p['late_box_blocks']} block{'s' if p['late_box_blocks'] > 1 else ''}"
            text = (f"tensor k_split={p['k_split']} {box} {'all' if p['early_half'] == 0 else 'half'} at entry"
                    f"{' cluster' if p['cluster'] else ''}{'' if p['evict_first'] else ' no-evict_first'}"
                    f"{' 512 threads' if p.get('threads', 32) == 512 else ''}"
                    f"{' scale loads' if p.get('scale_loads', 0) else ''}"
                    f"{(' + ' + CONSUMER_NAMES[p['consumer']]) if p.get('consumer', 0) else ''}"
                    f"{', boxes rotated by CTA' if p.get('rotate', 0) else ''}")
        elif self.kind == "chain":
            if p["late_order"] == CHAIN_TIMED and p["early"] == "all":
                text = "producer warp: all at entry"
            elif p["late_order"] == CHAIN_TIMED:
                text = f"clocked: {p['early']} at entry, the next every {p['pace_cycles']} cycles"
            else:
                text = CHAIN_NAMES[(p["weight"], p["early"], p["late_order"], p["activations"])]
            if p["min_smem"] == 0:
                text += ", small CTAs"
            elif p["min_smem"] != CHAIN_MIN_SMEM:
                text += f", {p['min_smem'] // KIB} KB"
            if p["threads"] != 256:
                text += f", {p['threads']} threads"
            if not p.get("outputs", 1):
                text += ", no output"
            if p.get("act_split", CHAIN_ACT_SPLIT) != CHAIN_ACT_SPLIT:
                text += f", K/{p['act_split']} a CTA"
            if p.get("hold_cycles", 0):
                text += f", then {p['hold_cycles']} cycles of work"
            if p.get("stream_mod", 1) != 1:
                text += f", weight in 1 CTA of {p['stream_mod']}"
            if p.get("mma_entry", 0):
                text += f", {8 * p['mma_entry']} wgmma a warpgroup at entry"
            if p.get("mma_tail", 0):
                text += f", {8 * p['mma_tail']} wgmma a warpgroup after the landing"
            if p.get("mma_consume", 0):
                text += f", consumed as it lands ({16 * p['mma_consume']} wgmma a {CHAIN_CHUNK // KIB} KB chunk)"
        else:
            text = (f"bulk chunk={p['chunk'] // KIB}K ring={p['chunk'] * p['stages'] // KIB}K "
                    f"ctas/SM={p['ctas_per_sm']}")
        return text + ("" if self.pdl else " no-PDL")


def all_variants() -> List[Variant]:
    variants = [Variant("ldg", {"depth": d, "ctas_per_sm": c}) for d in (2, 4, 8, 16) for c in (1, 2, 4)]
    variants.append(Variant("ldg", {"depth": 8, "ctas_per_sm": 2}, pdl=0))
    for chunk in (8 * KIB, 16 * KIB, 32 * KIB):
        for ring in (64 * KIB, 128 * KIB, 192 * KIB):
            variants.append(Variant("bulk", {"chunk": chunk, "stages": ring // chunk, "ctas_per_sm": 1}))
    variants.append(Variant("bulk", {"chunk": 16 * KIB, "stages": 6, "ctas_per_sm": 2}))
    variants.append(Variant("bulk", {"chunk": 16 * KIB, "stages": 8, "ctas_per_sm": 1}, pdl=0))
    return variants


def copy_size_variants() -> List[Variant]:
    """Does the size of each bulk copy matter at the same bytes in flight? (The ring GEMM kernel
    copies plain weights one 2 KB row at a time.)"""
    return [Variant("bulk", {"chunk": c * KIB, "stages": min(32, r // c), "ctas_per_sm": 1})
            for c, r in ((2, 64), (4, 64), (32, 64), (4, 128), (32, 128))]


def plan_copy_variants() -> List[Variant]:
    """The fused kernel's copy pattern, piece by piece (see the module docstring). box_blocks 0:
    the fused plan's (about 32 KB a box); early_half: half the boxes before griddepcontrol.wait."""
    def tensor(k_split=2, box_blocks=0, early_half=0, cluster=1, evict_first=1, threads=32, scale_loads=0, rotate=0):
        return Variant("tensor", {"k_split": k_split, "box_blocks": box_blocks, "early_half": early_half,
                                  "cluster": cluster, "evict_first": evict_first, "threads": threads,
                                  "scale_loads": scale_loads, "ctas_per_sm": 1, **({"rotate": 1} if rotate else {})})
    return [
        Variant("bulk", {"chunk": 32 * KIB, "stages": 4, "ctas_per_sm": 1}),   # the 0.98 reference
        Variant("bulk", {"chunk": 32 * KIB, "stages": 6, "ctas_per_sm": 1}),   # a whole share at entry
        tensor(),                          # the fused kernel's copies (flag 7 without its CTA)
        tensor(cluster=0),                 # ... without the cluster launch
        tensor(early_half=1),              # ... half the boxes after griddepcontrol.wait
        tensor(evict_first=0),             # ... without the L2 evict_first policy
        tensor(box_blocks=1),              # ... 8-10 KB boxes
        tensor(box_blocks=16),             # ... one box per CTA
        tensor(k_split=4),                 # ... a K split of 4
        # the fused kernel's other entry work (session 18): 512 threads that all wait, the block
        # scales loaded at entry (80 words: 5 tiles x 16 blocks)
        tensor(threads=512),
        tensor(early_half=1, threads=512),
        tensor(early_half=1, threads=512, scale_loads=80),
        # session 36: each CTA's requests start at box (row group) mod (their count): do the copies gain from
        # not starting all at the same K offset, as the register-fed probe's reads did?
        tensor(rotate=1),
        tensor(box_blocks=1, rotate=1),
        tensor(early_half=1, threads=512, scale_loads=80, rotate=1),
    ]


# What the tensor variant's 4 warpgroups do with each landed K block (stream_tensor_kernel's Consumer).
CONSUMER_NAMES = {1: "SS windows (the MMAs)", 2: "SS one window", 3: "swapped RS (weight as B)",
                  4: "SS one window + mma.sync tail", 5: "waits only (no MMA)",
                  6: "SS windows issued at once (no wait)", 7: "SS windows on the last box only",
                  8: "SS windows on all but the last box"}


def smem_read_variants() -> List[Variant]:
    """Session 23: what reading the landed weight from shared memory costs the stream, by the way
    it is read. The fused kernel's copies in its order (512 threads, half the boxes after
    griddepcontrol.wait, K split 2), then the same with its 4 warpgroups reading each K block as it
    lands: the fused kernel's MMAs (m64n8k32 over its 64-row windows: 8 tiles' bytes a block for
    5 tiles), one window only (4 tiles' bytes), the weight as wgmma's B operand (m64n80k32 or
    m64n64k32, tokens as A in registers: each byte read once, A from no shared memory), and one
    window with the fifth tile by mma.sync.m16n8k32 (warp q of a warpgroup takes K step q of it).
    No prologue, no epilogue, no block scales. (Plain ld.shared of the windows' bytes, session 19's
    diagnostic, was a fourth consumer; it faulted on the H200, illegal instruction, and was left out.)
    Session 26 adds two: every block's box waited for with no MMA, and the windows' MMAs issued at
    once without waiting for their boxes (garbage products; the boxes are waited for afterwards):
    the MMAs' cost with and without their dependence on the landing; and the windows' MMAs on the
    last box's blocks only (after every box has landed) or on every block but those."""
    def tensor(consumer):
        return Variant("tensor", {"k_split": 2, "box_blocks": 0, "early_half": 1, "cluster": 1, "evict_first": 1,
                                  "threads": 512, "scale_loads": 0, "consumer": consumer, "ctas_per_sm": 1})
    return [tensor(c) for c in (0, 1, 2, 3, 4, 5, 6, 7, 8)]


def split_free_variants() -> List[Variant]:
    """Session 27: would a plan without a K split stream as well? Without one a CTA needs no cluster
    and no exchange (the epilogue is 0.6 µs at 1-8 tokens on 5120x4096 with the exchange), but its
    whole K row of fewer tiles: 3 tiles (192 KB, 107 CTAs on 5120x4096, 96 on 4608x4096) or 2-3
    tiles on every SM; 4096x2048 2 tiles on 128. The copies alone (half the boxes at entry, 512
    threads, no cluster), beside the landed plan's (K split 2, clusters of 2), no consumer."""
    def tensor(k_split, cta_tiles, box_blocks):
        return Variant("tensor", {"k_split": k_split, "box_blocks": box_blocks, "early_half": 1,
                                  "cluster": 1 if k_split > 1 else 0, "evict_first": 1, "threads": 512,
                                  "scale_loads": 0, "consumer": 0, "cta_tiles": cta_tiles, "ctas_per_sm": 1})
    return [tensor(2, 0, 0), tensor(1, 3, 4), tensor(1, -1, 4), tensor(1, 2, 4)]


def late_box_variants() -> List[Variant]:
    """Session 27: the MMAs left after the last box lands (docs/sm90.md, session 26) with the boxes
    requested after griddepcontrol.wait cut into boxes of 1 or 2 K blocks, so that they land, and
    can be read, one after another. The fused kernel's copies (half the plan's boxes at entry, 512
    threads, K split 2), with no consumer, with the waits only and with the MMAs, each with the
    plan's boxes, late boxes of 1 and 2 blocks, and every box 1 block."""
    def tensor(consumer, box_blocks=0, late_box_blocks=0):
        return Variant("tensor", {"k_split": 2, "box_blocks": box_blocks, "early_half": 1, "cluster": 1,
                                  "evict_first": 1, "threads": 512, "scale_loads": 0, "consumer": consumer,
                                  "late_box_blocks": late_box_blocks, "ctas_per_sm": 1})
    return [tensor(c, box, late) for c in (0, 5, 1) for box, late in ((0, 0), (0, 1), (0, 2), (1, 0))]


# The chain variant (session 29): (weight, early, late_order, activations) -> name. early: "all",
# "half" or "none" of the share's copies at entry; late_order: stream_chain_kernel's LateOrder.
CHAIN_NAMES = {
    (1, "all", 0, 0): "weight all at entry, no activations",
    (0, "none", 0, 0): "neither (the launch, the wait, the output)",
    (0, "none", 0, 1): "activations alone (no weight)",
    (1, "all", 0, 1): "weight all at entry",
    (1, "half", 0, 1): "half at entry, rest before the activation loads",
    (1, "half", 1, 1): "half at entry, rest once the loads are issued",
    (1, "half", 2, 1): "half at entry, rest once the loads return",
    (1, "none", 2, 1): "none at entry, all once the loads return",
    (1, "none", 1, 1): "none at entry, all once the loads are issued",
    (1, "one", 3, 1): "paced: 1 copy in flight, the next as it lands",
    (1, "two", 3, 1): "paced: 2 copies in flight, the next as one lands",
}
CHAIN_TIMED = 4  # (session 33) stream_chain_kernel's kTimed: a producer warp requests the copies on a clock
CHAIN_CHUNK = 32 * KIB      # bytes a weight copy (the bulk reference's)
CHAIN_ACT_SPLIT = 2         # a CTA reads half of K (the plans' K split of 2)
CHAIN_MIN_SMEM = 160 * KIB  # one CTA an SM, as the fused kernel's
CHAIN_MS = (1, 4, 8, 16, 32)


def chain_variants() -> List[Variant]:
    """Session 29: the weight share and the activations in every order (CHAIN_NAMES), one CTA an
    SM; neither, the activations alone and the whole order also with small CTAs that let launches
    overlap; the weight alone in CTAs of 32 threads; two orders with 2000 or 4000 SM cycles of
    work after the last landing, and all at entry with that work in small CTAs."""
    def chain(weight, early, late_order, activations, min_smem=CHAIN_MIN_SMEM, threads=256, outputs=1,
              act_split=CHAIN_ACT_SPLIT, hold_cycles=0):
        return Variant("chain", {"weight": weight, "early": early, "late_order": late_order,
                                 "activations": activations, "min_smem": min_smem, "threads": threads,
                                 "outputs": outputs, "act_split": act_split, "hold_cycles": hold_cycles,
                                 "ctas_per_sm": 1})
    return ([chain(*key) for key in CHAIN_NAMES  # (the paced orders and the activations first: --chain-mma only)
             if key[1] not in ("one", "two") and key != (1, "none", 1, 1)]
            + [chain(0, "none", 0, 0, min_smem=0),       # launches may overlap on an SM
               chain(0, "none", 0, 1, min_smem=0),
               chain(1, "all", 0, 1, min_smem=0),        # ... where the share leaves room (4096x2048)
               chain(1, "all", 0, 0, threads=32),        # the weight stream in the bulk variant's CTA size
               # what separates that from the bulk reference: its shared memory, its output
               chain(1, "all", 0, 0, threads=32, min_smem=128 * KIB),
               chain(1, "all", 0, 0, threads=32, outputs=0),
               chain(1, "all", 0, 1, min_smem=128 * KIB),
               # fewer activation bytes a CTA: a K split of 4 or 8 (the exchange it needs not modelled)
               chain(1, "all", 0, 1, act_split=4),
               chain(1, "all", 0, 1, act_split=8),
               chain(1, "half", 1, 1, act_split=4)]
            # work after the last landing (as the MMAs' tail and the exchange): does the order hide it?
            + [chain(1, early, late, 1, hold_cycles=cycles) for early, late in (("all", 0), ("half", 1))
               for cycles in (2000, 4000)]
            # ... and where another CTA may stream on the SM meanwhile (4096x2048's 64 KB shares)
            + [chain(1, "all", 0, 1, min_smem=0, hold_cycles=cycles) for cycles in (2000, 4000)])


# Session 30 (--chain-mma): the chain with the fused kernel's tensor work and nothing else, and
# thread 0's stamps (ChainStamp): does a burst of wgmma cost a launch more than its issue time (a
# lower SM clock, measured by clock64 against the global timer), and how long do the first
# activation loads take after griddepcontrol.wait with the share in flight, or none of it?
CHAIN_MMA_MS = (1, 8)
CHAIN_STAMPS = 18     # words a CTA (stream_ceiling.cu's kChainStamps)
CHAIN_STAMPED_CHUNKS = 8  # chunks whose landing is stamped (kStampedChunks, from word 10)
CHAIN_FUSED_ROUNDS = 4  # the fused op also timed in a graph that calls it this many times on every copy
CHAIN_STAMP_SKIP = 4  # a replay's first launches, left out of the stamp statistics (the graph's start)


def chain_mma_variants() -> List[Variant]:
    """The whole share at entry and the fused kernel's order (half, the rest once the activation
    loads are issued), each plain, with 16 wgmma a warpgroup at entry (before the wait: off the
    chain from one release to the next), with 8 after the landing (on it: the fused kernel's MMAs
    on its last box), with both, and with 400 cycles of spinning after the landing instead; the
    share paced (1 or 2 copies in flight, the next as one lands, whatever the previous grid does;
    2 also with the wgmma after the landing): do fewer bytes in flight let the activation loads
    through sooner without slowing the stream?; the share requested only once the loads return, or
    as soon as they are issued (the loads ahead of every copy of the CTA; also with the wgmma); only
    even CTAs streaming (are the loads slow behind this SM's copies or behind everyone's?); the
    launch alone with and without wgmma; the launch alone and the whole share at entry with 8, 16 or
    32 wgmma a warpgroup at entry (does the SM clock follow the tensor work?)."""
    def chain(weight, early, late_order, activations, **extra):
        return Variant("chain", {"weight": weight, "early": early, "late_order": late_order,
                                 "activations": activations, "min_smem": CHAIN_MIN_SMEM, "threads": 256,
                                 "outputs": 1, "act_split": CHAIN_ACT_SPLIT, "hold_cycles": 0, "ctas_per_sm": 1,
                                 **extra})
    variants = []
    for key in ((1, "all", 0, 1), (1, "half", 1, 1)):
        variants += [chain(*key), chain(*key, mma_entry=2), chain(*key, mma_tail=1),
                     chain(*key, mma_entry=2, mma_tail=1), chain(*key, hold_cycles=400)]
    variants += [chain(1, "one", 3, 1), chain(1, "two", 3, 1), chain(1, "two", 3, 1, mma_tail=1),
                 chain(1, "none", 2, 1), chain(1, "none", 1, 1), chain(1, "none", 1, 1, mma_tail=1),
                 chain(1, "all", 0, 1, stream_mod=2),
                 chain(0, "none", 0, 0), chain(0, "none", 0, 0, mma_entry=2, mma_tail=1)]
    # does the SM clock follow the amount of tensor work, or does any wgmma switch it? (8, 16, 32 a warpgroup)
    variants += [chain(*key, mma_entry=rounds) for key in ((0, "none", 0, 0), (1, "all", 0, 1)) for rounds in (1, 2, 4)
                 if key != (1, "all", 0, 1) or rounds != 2]
    return variants


def streaming_chain(early: str, late_order: int, threads: int, **extra) -> Variant:
    """A chain variant that streams its weight share and reads its activations (K/2 a CTA unless
    `extra` says otherwise), one CTA an SM: --chain-consume's and --chain-timed's."""
    return Variant("chain", {"weight": 1, "early": early, "late_order": late_order, "activations": 1,
                             "min_smem": CHAIN_MIN_SMEM, "threads": threads, "outputs": 1,
                             "act_split": CHAIN_ACT_SPLIT, "hold_cycles": 0, "ctas_per_sm": 1, **extra})


# Session 32 (--chain-consume): the chain with a GEMM's tensor work spread over its share as it
# lands (stream_chain_kernel's MMA_CONSUME): 16 m64n8k32 a 32 KB chunk is every weight byte read
# once as wgmma's A operand (the fused kernel's 5-tile CTAs read theirs 1.6 times: two windows over
# 5 tiles), 32 twice. How close to the floor can a one-CTA-an-SM design that streams its share and
# multiplies it as it lands get, before quantization, block scales and a K split's exchange?
CHAIN_CONSUME_MS = CHAIN_MS  # the 15 bench points
# the fused op beside them: its own plan, every copy at entry, and every copy at entry with neither
# the activations nor the epilogue (flags 2 + 4: the stream and the MMAs alone; garbage output)
CHAIN_CONSUME_FUSED = [("fused every copy at entry", [0, 0, 64, 0, 0]),
                       ("fused every copy at entry, stream and MMAs alone (flag 6)", [0, 0, 64, 0, 6])]


def chain_consume_variants() -> List[Variant]:
    """The whole share at entry with nothing after the loads (K/2 or K/4 of the activations a CTA, as
    the fused kernel's K splits of 2 and 4); consumed as it lands, read once, by 2 or 4 warpgroups
    (4: also with K/4, and in the fused kernel's order: half at entry, the rest once the activation
    loads are issued); read twice by 4 warpgroups (the fused kernel's 5-tile CTAs read theirs 1.6
    times)."""
    def chain(early, late_order, threads=512, **extra):
        return streaming_chain(early, late_order, threads, **extra)
    return [chain("all", 0, 256), chain("all", 0, 256, act_split=4),
            chain("all", 0, 256, mma_consume=1), chain("all", 0, mma_consume=1),
            chain("all", 0, mma_consume=1, act_split=4), chain("half", 1, mma_consume=1),
            chain("all", 0, mma_consume=2)]


# Session 33 (--chain-timed): copies requested on a clock. Back to back, a CTA's copies requested at
# entry land in a burst at the end of its stream (session 30), so its MMAs follow the last landing;
# copies paced by their landings (1-2 in flight) lengthened the stream. Here a producer warp of its own
# requests the first `early` copies at entry and each later one a fixed number of SM cycles after the
# previous (its CTA's fair share of the copy rate is about one 32 KB copy a microsecond, ~1900 cycles):
# do copies requested on a clock land spread out and in order, do the activation loads come back
# sooner (less in flight in the grid's queue), and what does the stream lose? With and without a
# consumer that multiplies each chunk as it lands (--chain-consume's, read once, 512 threads).
CHAIN_TIMED_MS = CHAIN_MS
CHAIN_TIMED_FUSED = [("fused every copy at entry, stream and MMAs alone (flag 6)", [0, 0, 64, 0, 6])]
CHAIN_TIMED_PACES = (("two", 1000), ("two", 1500), ("two", 2000), ("one", 1000), ("one", 1500), ("three", 1500))
CHAIN_TIMED_CONSUME_PACES = (("two", 1000), ("two", 1500), ("two", 2000), ("one", 1000), ("three", 1500))


def chain_timed_variants() -> List[Variant]:
    """The whole share at entry and the fused kernel's order (half, the rest once the activation
    loads are issued), then the share on a clock (CHAIN_TIMED_PACES: copies at entry, SM cycles
    between the later ones) and every copy at entry from the producer warp; the same with the share
    consumed as it lands (read once, 512 threads), whole at entry, in the fused kernel's order and on
    a clock (CHAIN_TIMED_CONSUME_PACES)."""
    def chain(early, late_order, threads=256, **extra):
        return streaming_chain(early, late_order, threads, **extra)
    return ([chain("all", 0), chain("half", 1)]
            + [chain(early, CHAIN_TIMED, pace_cycles=pace) for early, pace in CHAIN_TIMED_PACES]
            # (call 2) the producer warp with nothing left for its clock: every copy at entry, as the first
            # line but from the extra warp, which then exits (does the warp or the clock cost the loads?)
            + [chain("all", CHAIN_TIMED, pace_cycles=1000)]
            + [chain("all", 0, 512, mma_consume=1), chain("half", 1, 512, mma_consume=1),
               chain("all", CHAIN_TIMED, 512, mma_consume=1, pace_cycles=1000)]
            + [chain(early, CHAIN_TIMED, 512, mma_consume=1, pace_cycles=pace)
               for early, pace in CHAIN_TIMED_CONSUME_PACES])


def summarize_chain_stamps(stamps, stream_mod: int = 1, skip: int = CHAIN_STAMP_SKIP) -> dict:
    """Thread 0's stamps of every CTA of every launch of one graph replay (stamps: [launches, grid,
    CHAIN_STAMPS] int64, stream_ceiling.cu's ChainStamp order), launches from `skip` on: medians over
    CTAs and launches (and the 90th percentile of the activation loads' latency) of the SM clock
    (clock64 cycles over global-timer ns, entry to exit) and of the phases, in microseconds; the
    median spread of one launch's releases; the median distance from one launch's last release to
    the next's. Where only some CTAs stream (stream_mod > 1), the loads' latency of the CTAs that
    stream and of those that do not."""
    import numpy as np

    st = np.asarray(stamps, dtype=np.int64)[skip:]
    clock = (st[..., 6] - st[..., 0]) / np.maximum(st[..., 5] - st[..., 1], 1) * 1e3  # MHz
    us = lambda later, earlier: (st[..., later] - st[..., earlier]) / 1e3  # noqa: E731
    act = us(3, 2)
    releases = st[..., 2]
    out = {
        "sm_clock_mhz": float(np.median(clock)),
        "entry_to_release_us": float(np.median(us(2, 1))),
        "activation_latency_us": float(np.median(act)),
        "activation_latency_p90_us": float(np.percentile(act, 90)),
        "release_to_landed_us": float(np.median(us(4, 2))),
        "landed_to_exit_us": float(np.median(us(5, 4))),
        "release_to_exit_us": float(np.median(us(5, 2))),
        "early_issue_us": float(np.median(us(8, 1))),
        "release_spread_us": float(np.median((releases.max(axis=1) - releases.min(axis=1)) / 1e3)),
        "release_to_next_release_us": float(np.median(np.diff(releases.max(axis=1)) / 1e3)) if len(st) > 1 else None,
    }
    # when chunk c had landed, from the release, where every CTA stamped it (a stamp is 0 past its chunks)
    out["chunk_landed_us"] = [float(np.median((st[..., 10 + c] - st[..., 2]) / 1e3))
                              for c in range(CHAIN_STAMPED_CHUNKS) if (st[..., 10 + c] > 0).all()]
    late = st[..., 9] > 0  # CTAs with copies after the wait
    # how long thread 0 took to request them, from the point its order names (the release, or its
    # activation loads' issue or return: from the release in all three)
    out["late_issue_us"] = float(np.median((st[..., 9] - st[..., 2])[late] / 1e3)) if late.any() else None
    if stream_mod > 1:
        streams = (np.arange(st.shape[1]) % stream_mod) == 0
        out["activation_latency_streaming_us"] = float(np.median(act[:, streams]))
        out["activation_latency_not_streaming_us"] = float(np.median(act[:, ~streams]))
    return out


# The bulk variant (a 128 KB ring; 160 KB: the chain variants' shared memory), timed beside the
# chain variants at every M.
CHAIN_BULK_REFERENCES = [Variant("bulk", {"chunk": 32 * KIB, "stages": 4, "ctas_per_sm": 1}),
                         Variant("bulk", {"chunk": 32 * KIB, "stages": 5, "ctas_per_sm": 1})]


# The fused op beside the chain variants: its own plan, and its diagnostic flags (garbage outputs)
# 1 (no MMAs: the copies, the prologue and the epilogue), 5 (no MMAs, no epilogue) and 7 (its
# copies alone).
CHAIN_FUSED = [("fused default", None),
               ("fused without MMAs (flag 1)", [0, 0, 0, 0, 1]),
               ("fused without MMAs or epilogue (flag 5)", [0, 0, 0, 0, 5]),
               ("fused copies alone (flag 7)", [0, 0, 0, 0, 7])]


def chain_geometry(v: Variant, n: int, k: int, m: int, nbytes: int, sms: int) -> dict:
    """A chain variant's launch: copies a CTA (its largest share in CHAIN_CHUNK copies), how many
    at entry, the output's 16-byte units a CTA (M x N bf16 over the grid)."""
    p = v.params
    share = -(-(nbytes // 16) // sms) * 16 if p["weight"] else 0
    chunks = -(-share // CHAIN_CHUNK)
    early = {"all": chunks, "half": (chunks + 1) // 2, "none": 0, "one": min(1, chunks), "two": min(2, chunks),
             "three": min(3, chunks)}[p["early"]]
    out_units = -(-(m * n * 2) // (16 * sms)) if p.get("outputs", 1) else 0
    return {"grid": sms, "chunks": chunks, "early": early, "out_units": out_units,
            "act_split": p.get("act_split", CHAIN_ACT_SPLIT)}


def expected_act_fold(act_words, m: int, k: int, grid: int, split: int):
    """The chain kernel's activation checksum: for CTA b, the XOR of every 32-bit word of rows
    0..m-1 of K slice b % split (act_words: the M x K bf16 activations as uint32, row-major)."""
    import numpy as np

    rows = act_words[:m * k // 2].reshape(m, k // 2)
    width = k // 2 // split
    per_slice = [np.bitwise_xor.reduce(rows[:, s * width:(s + 1) * width].reshape(-1)) if m else np.uint32(0)
                 for s in range(split)]
    return np.array([per_slice[b % split] for b in range(grid)], dtype=np.uint32)


def tensor_geometry(v: Variant, n: int, k: int, sms: int) -> dict:
    """The fused wgmma ring plan's partition (sm90_gemm_plan.h): clusters of k_split CTAs over K,
    row groups = min(SMs / k_split, tiles / 4), boxes of about 32 KB (wgmma_chunk_blocks)."""
    p = v.params
    tiles, kblocks = n // 16, k // 128
    groups = min(sms // p["k_split"], tiles // 4)
    if p.get("cta_tiles", 0) > 0:  # session 27: CTAs of at most cta_tiles tiles, as many as fit on the SMs
        groups = min(sms // p["k_split"], -(-tiles // p["cta_tiles"]))
    elif p.get("cta_tiles", 0) < 0:  # every SM a row group of its own (CTAs of uneven tile counts)
        groups = min(sms // p["k_split"], tiles)
    max_tiles = -(-tiles // groups)
    blocks = -(-kblocks // p["k_split"])
    box = p["box_blocks"] or max(1, -(-32 * KIB // (max_tiles * 16 * 128)))
    box = min(box, blocks)
    chunks = -(-blocks // box)
    early = (chunks + 1) // 2 if p["early_half"] else chunks
    # boxes after the early ones: late_box_blocks blocks each where set (session 27), else the same
    late_box = min(p.get("late_box_blocks", 0) or box, blocks)
    return {"groups": groups, "max_tiles": max_tiles, "box_blocks": box,
            "chunks": len(box_starts(blocks, box, late_box, early)), "early": early, "late_box_blocks": late_box,
            "grid": p["k_split"] * groups}


def box_starts(nblocks: int, box: int, late_box: int, early: int) -> List[int]:
    """The first block of each of a CTA's boxes (stream_ceiling.cu's BoxLayout): `early` boxes of
    `box` blocks at most, then boxes of `late_box` blocks over the rest of its `nblocks`."""
    early = min(early, -(-nblocks // box))
    return [c * box for c in range(early)] + list(range(min(early * box, nblocks), nblocks, late_box))


SM_SMEM_BYTES = 228 * KIB  # shared memory an H100/H200 SM has for CTAs (each CTA also takes 1 KB reserved)


def cap_smem(cap: int) -> int:
    """Dynamic shared memory a CTA that lets `cap` of them, and no more, fit an SM (128-byte multiple): the
    SM's share less the 1 KB each CTA has reserved and 1 KB for the kernel's static shared memory (the
    occupancy query checks the result: ctas_fit_per_sm)."""
    return (SM_SMEM_BYTES // cap - 2 * KIB) // 128 * 128


def ldg_smem(v: "Variant") -> int:
    return cap_smem(v.params["cap"]) if v.params.get("cap", 0) else 0


def ldg_residency_variants() -> List[Variant]:
    """Session 36: does the read-only ldg stream owe its speed to the next launch's CTAs starting on an SM
    (PDL) while this launch's are still there? Each variant as is and with its CTAs an SM capped (by unused
    shared memory) at what it asks for, so the next launch's CTAs wait for this launch's to leave."""
    variants = []
    for depth, ctas in ((8, 4), (4, 4), (8, 2), (16, 2), (8, 3), (8, 5), (4, 5), (4, 6)):
        variants.append(Variant("ldg", {"depth": depth, "ctas_per_sm": ctas}))
        variants.append(Variant("ldg", {"depth": depth, "ctas_per_sm": ctas, "cap": ctas}))
    variants.append(Variant("bulk", {"chunk": 16 * KIB, "stages": 8, "ctas_per_sm": 1}))
    return variants


def quick_variants() -> List[Variant]:
    return [
        Variant("ldg", {"depth": 8, "ctas_per_sm": 2}),
        Variant("ldg", {"depth": 8, "ctas_per_sm": 2}, pdl=0),
        Variant("bulk", {"chunk": 16 * KIB, "stages": 8, "ctas_per_sm": 1}),
        Variant("bulk", {"chunk": 16 * KIB, "stages": 8, "ctas_per_sm": 1}, pdl=0),
    ]


# ---- build and load the kernels ----------------------------------------------------------------------


def find_nvcc() -> str:
    candidates = []
    if os.environ.get("CUDA_HOME"):
        candidates.append(os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc"))
    candidates.append("/usr/local/cuda/bin/nvcc")
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(on_path)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise RuntimeError("nvcc not found (looked at $CUDA_HOME/bin, /usr/local/cuda/bin and PATH)")


def compile_shared_library(source: str, out_dir: str) -> str:
    """A probe's .cu file as a shared library of sm_90a code in out_dir; its path. (-arch=sm_90a would
    also assemble compute_90 PTX, which rejects wgmma.)"""
    so = os.path.join(out_dir, os.path.splitext(os.path.basename(source))[0] + ".so")
    cmd = [find_nvcc(), "-O3", "-gencode", "arch=compute_90a,code=sm_90a", "-shared", "-Xcompiler", "-fPIC",
           "-o", so, source]
    progress("building: " + " ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nvcc failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return so


def build_library(out_dir: str) -> str:
    return compile_shared_library(CU_SOURCE, out_dir)


class Kernels:
    """ctypes view of the extern "C" entry points; every launch's cudaError_t is checked."""

    def __init__(self, so_path: str):
        lib = ctypes.CDLL(so_path)
        p, ll, i = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int
        lib.stream_ceiling_ldg.argtypes = [p, ll, p, i, i, i, i, i, p]
        lib.stream_ceiling_ldg.restype = i
        lib.stream_ceiling_bulk.argtypes = [p, ll, p, i, i, i, i, i, p]
        lib.stream_ceiling_bulk.restype = i
        lib.stream_ceiling_tensor.argtypes = [p, ll, ll, p, i, i, i, i, i, i, i, i, i, i, i, i, p]
        lib.stream_ceiling_tensor.restype = i
        lib.stream_ceiling_chain.argtypes = [p, ll, p, p, i, i, i, p, i, p, i, i, i, i, i, i, i, i, p, i, i, i, i, i,
                                             p]
        lib.stream_ceiling_chain.restype = i
        lib.stream_ceiling_occupancy.argtypes = [i, i, i, ctypes.POINTER(i)]
        lib.stream_ceiling_occupancy.restype = i
        lib.stream_ceiling_error_string.argtypes = [i]
        lib.stream_ceiling_error_string.restype = ctypes.c_char_p
        self.lib = lib

    def check(self, code: int, what: str) -> None:
        if code != 0:
            message = self.lib.stream_ceiling_error_string(code).decode()
            raise RuntimeError(f"{what}: CUDA error {code} ({message})")

    def launch(self, v: Variant, buf_ptr: int, nbytes: int, out_ptr: int, sms: int, nk=None) -> None:
        # The stream is read at call time: inside torch.cuda.graph() it is the capturing stream,
        # so the launch lands in the graph exactly like the fused op's does in bench.
        stream = torch.cuda.current_stream().cuda_stream
        p = v.params
        if v.kind == "tensor":
            n, k = nk
            g = tensor_geometry(v, n, k, sms)
            code = self.lib.stream_ceiling_tensor(buf_ptr, n, k, out_ptr, p["k_split"], g["groups"], g["box_blocks"],
                                                  g["early"], g["late_box_blocks"], p["evict_first"], p["cluster"], p["threads"],
                                                  p["scale_loads"], p.get("consumer", 0), p.get("rotate", 0), v.pdl,
                                                  stream)
        elif v.kind == "ldg":
            code = self.lib.stream_ceiling_ldg(buf_ptr, nbytes, out_ptr, sms, p["ctas_per_sm"], p["depth"], ldg_smem(v),
                                               v.pdl, stream)
        else:
            code = self.lib.stream_ceiling_bulk(buf_ptr, nbytes, out_ptr, sms, p["ctas_per_sm"], p["chunk"],
                                                p["stages"], v.pdl, stream)
        self.check(code, f"launch of {v.name}")

    def launch_chain(self, v: Variant, buf_ptr: int, nbytes: int, out_ptr: int, act_ptr: int, m: int, k: int,
                     outputs_ptr: int, act_fold_ptr: int, geometry: dict, stamps_ptr: Optional[int] = None) -> None:
        p, g = v.params, geometry
        stream = torch.cuda.current_stream().cuda_stream
        code = self.lib.stream_ceiling_chain(buf_ptr if p["weight"] else None, nbytes if p["weight"] else 0, out_ptr,
                                             act_ptr if p["activations"] else None, m, k, g["act_split"], outputs_ptr,
                                             g["out_units"], act_fold_ptr, g["grid"], p["threads"], CHAIN_CHUNK,
                                             g["early"], p["late_order"], p["min_smem"], p.get("hold_cycles", 0),
                                             p.get("stream_mod", 1), stamps_ptr, p.get("mma_entry", 0),
                                             p.get("mma_tail", 0), p.get("mma_consume", 0), p.get("pace_cycles", 0),
                                             v.pdl, stream)
        self.check(code, f"launch of {v.name}")

    def blocks_per_sm(self, v: Variant) -> int:
        """CTAs of this variant that fit on one SM at once (is ctas_per_sm really co-resident?)."""
        n = ctypes.c_int(0)
        if v.kind in ("tensor", "chain"):
            return 1  # the rings (and the chain's min_smem) hold an SM; all that is asked is 1
        if v.kind == "ldg":
            code = self.lib.stream_ceiling_occupancy(0, v.params["depth"], ldg_smem(v), ctypes.byref(n))
        else:
            code = self.lib.stream_ceiling_occupancy(1, v.params["chunk"] * v.params["stages"], 0, ctypes.byref(n))
        self.check(code, f"occupancy of {v.name}")
        return n.value


# ---- expected fold values (the kernels' checksums, recomputed on the host) -----------------------


def cta_slices(units: int, grid: int):
    """The kernels' split: CTA b reads 16-byte units [begin, end), contiguous and balanced."""
    base, extra = divmod(units, grid)
    for b in range(grid):
        begin = base * b + min(b, extra)
        yield begin, begin + base + (1 if b < extra else 0)


def expected_tensor_fold(v: Variant, words, n: int, k: int, sms: int):
    """tensor: per CTA (index group * k_split + rank) the XOR over its boxes of the first word of
    each 16-byte piece of the box's first row (zero past K: the map's out-of-bounds fill)."""
    import numpy as np

    g = tensor_geometry(v, n, k, sms)
    s, tiles, kblocks = v.params["k_split"], n // 16, k // 128
    out = np.zeros(g["grid"], dtype=np.uint32)
    for group in range(g["groups"]):
        row0 = group * tiles // g["groups"] * 16
        for rank in range(s):
            kb_begin, kb_end = rank * kblocks // s, (rank + 1) * kblocks // s
            acc = np.uint32(0)
            for start in box_starts(kb_end - kb_begin, g["box_blocks"], g["late_box_blocks"], g["early"]):
                kb = kb_begin + start
                if kb < kblocks:
                    word = (row0 * k + kb * 128) // 4
                    acc ^= np.bitwise_xor.reduce(words[word:word + 32:4])
            out[group * s + rank] = acc
    return out


def expected_fold(v: Variant, words, nbytes: int, grid: int):
    """ldg: XOR of every 32-bit word of the CTA's slice; bulk: XOR of the first word of each of
    the CTA's chunks. `words` is the copy's bytes as a numpy uint32 array."""
    import numpy as np

    out = np.zeros(grid, dtype=np.uint32)
    for b, (begin, end) in enumerate(cta_slices(nbytes // 16, grid)):
        if v.kind == "ldg":
            out[b] = np.bitwise_xor.reduce(words[4 * begin:4 * end]) if end > begin else 0
        else:
            starts = np.arange(16 * begin, 16 * end, v.params["chunk"]) // 4
            out[b] = np.bitwise_xor.reduce(words[starts]) if len(starts) else 0
    return out


def wait_or_die(what: str) -> None:
    """Synchronize, but turn a hang (e.g. an mbarrier wait that never completes) into a clear
    message and exit instead of blocking forever; a fault surfaces as an exception here."""
    event = torch.cuda.Event()
    event.record()
    deadline = time.monotonic() + HANG_TIMEOUT_S
    while not event.query():
        if time.monotonic() > deadline:
            print(f"error: {what} did not finish within {HANG_TIMEOUT_S:.0f} s (hang); aborting", flush=True)
            os._exit(3)
        time.sleep(0.001)
    torch.cuda.synchronize()


# ---- measurement -------------------------------------------------------------------------------------


def weight_bytes(n: int, k: int) -> int:
    """FP8 weight + fp32 block scales (one per 128x128 block), rounded up to 16 bytes."""
    nbytes = n * k + 4 * ((n + 127) // 128) * (k // 128)
    return (nbytes + 15) // 16 * 16


def copies_for(nbytes: int, l2_bytes: int) -> int:
    return max(MIN_COPIES, math.ceil(L2_MULTIPLE * l2_bytes / nbytes))


def weight_pool(nbytes: int, kind: str, generator, device) -> torch.Tensor:
    """`nbytes` uint8 of rotated weight copies: random bytes ("random"), or ("e4m3", session 32)
    the e4m3 bytes of 0.5 x normal draws, as bench's weights are (random bytes are 1/128 NaN and
    spread over every exponent), drawn a piece at a time (a float32 draw of the whole pool would be
    4x its size)."""
    if kind == "random":
        return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device, generator=generator)
    if kind != "e4m3":
        raise ValueError(f"pool must be 'random' or 'e4m3', not {kind!r}")
    pool = torch.empty(nbytes, dtype=torch.uint8, device=device)
    step = 1 << 26
    for start in range(0, nbytes, step):
        piece = pool[start:start + step]
        draw = torch.randn(piece.numel(), generator=generator, device=device) * 0.5
        piece.copy_(draw.to(torch.float8_e4m3fn).view(torch.uint8))
    return pool


class Setup:
    """What every measurement here starts from: the device's SMs and L2, the kernels built and
    loaded, the copy rate of this run (the floors' denominator), and one pool of rotated weight
    copies for every Qwen shape (`plan`: (N, K, bytes, stride, copies); each copy 256-byte
    aligned) drawn from `generator`. Random bytes, never an all-zero buffer: zeros time
    unrealistically (as bench notes) and would make the checksum checks prove nothing; or, with
    pool="e4m3" (session 32), e4m3 values as bench's weights (weight_pool)."""

    def __init__(self, pool: str = "random"):
        from sglang_fp8ext.bench import QWEN_TP4_SHAPES, measure_copy_bandwidth

        self.device = torch.device("cuda")
        props = torch.cuda.get_device_properties(0)
        self.sms = props.multi_processor_count
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2)
        self.tmp = tempfile.mkdtemp(prefix="stream_ceiling_")
        self.kernels = Kernels(build_library(self.tmp))
        progress(f"measuring device-to-device copy bandwidth on {torch.cuda.get_device_name()} ...")
        self.copy_tbps = measure_copy_bandwidth(self.device)
        progress(f"copy bandwidth: {self.copy_tbps:.2f} TB/s, {self.sms} SMs, L2 {self.l2_bytes / 1e6:.1f} MB")
        self.plan = []
        for n, k in QWEN_TP4_SHAPES:
            nbytes = weight_bytes(n, k)
            stride = (nbytes + 255) // 256 * 256
            self.plan.append((n, k, nbytes, stride, copies_for(nbytes, self.l2_bytes)))
        self.generator = torch.Generator(device=self.device).manual_seed(0)
        pool_bytes = max(stride * copies for _, _, _, stride, copies in self.plan)
        self.pool = weight_pool(pool_bytes, pool, self.generator, self.device)

    def close(self) -> None:
        del self.pool
        torch.cuda.empty_cache()
        shutil.rmtree(self.tmp, ignore_errors=True)


def check_then_time(launch, checksums_ok, what: str, copies: int, replays: int):
    """Launch on copy 0 eagerly (it surfaces launch errors, faults and hangs before a graph is
    captured), compare what the kernel read with the host's (`checksums_ok()`), then time a graph of
    one launch per rotated copy as bench does: (median us per launch, checksums ok). The caller
    clears the checksum buffers before."""
    from sglang_fp8ext.bench import time_in_graph

    launch(0)
    wait_or_die(what)
    ok = bool(checksums_ok())
    if not ok:
        progress(f"  WARNING: {what}: a checksum differs from the host's: the kernel did not read exactly "
                 f"what it should")
    return time_in_graph([lambda i=i: launch(i) for i in range(copies)], replays), ok


def run(args) -> dict:
    from sglang_fp8ext.bench import git_commit

    variants = (plan_copy_variants() if args.plan_copies else smem_read_variants() if args.smem_reads
                else late_box_variants() if args.late_boxes else split_free_variants() if args.split_free else copy_size_variants() if args.copy_sizes
                else ldg_residency_variants() if args.ldg_residency else quick_variants() if args.quick else all_variants())

    setup = Setup()
    device, sms, kernels, copy_tbps = setup.device, setup.sms, setup.kernels, setup.copy_tbps
    plan, pool = setup.plan, setup.pool
    fits = {v.name: kernels.blocks_per_sm(v) for v in variants}
    for v in variants:
        if fits[v.name] < v.params["ctas_per_sm"]:
            progress(f"note: {v.name}: only {fits[v.name]} CTA(s) fit per SM; the grid runs in waves")
        if v.params.get("cap", 0) and fits[v.name] != v.params["cap"]:
            progress(f"WARNING: {v.name}: {fits[v.name]} CTAs fit an SM, not the cap {v.params['cap']} (see ctas_fit_per_sm)")
    max_grid = sms * max(v.params["ctas_per_sm"] for v in variants)
    out = torch.zeros(max_grid, dtype=torch.int32, device=device)  # one uint32 fold per CTA
    base_ptr, out_ptr = pool.data_ptr(), out.data_ptr()

    rows = []
    total, done = len(plan) * len(variants), 0
    started = time.monotonic()
    for n, k, nbytes, stride, copies in plan:
        floor_us = nbytes / copy_tbps / 1e6
        words = pool[:nbytes].cpu().numpy().view("<u4")  # copy 0, for the checksum check
        for v in variants:
            done += 1
            tensor = v.kind == "tensor"
            grid = tensor_geometry(v, n, k, sms)["grid"] if tensor else sms * v.params["ctas_per_sm"]
            expected = expected_tensor_fold(v, words, n, k, sms) if tensor else expected_fold(v, words, nbytes, grid)
            out.zero_()
            us, fold_ok = check_then_time(
                lambda i, v=v: kernels.launch(v, base_ptr + i * stride, nbytes, out_ptr, sms, (n, k)),
                lambda: (out[:grid].cpu().numpy().view("<u4") == expected).all(),
                f"{v.name} on N={n} K={k}", copies, args.replays)
            rows.append({
                "N": n, "K": k, "bytes": nbytes, "variant": v.name, "kind": v.kind,
                "params": {**v.params, **(tensor_geometry(v, n, k, sms) if tensor else {}),
                           "grid": grid, "ctas_fit_per_sm": fits[v.name]},
                "pdl": v.pdl, "us": us, "floor_us": floor_us, "floor_over_us": floor_us / us,
                "fold_ok": fold_ok, "copies": copies,
            })
            progress(f"[{done}/{total}] N={n} K={k} {v.name}: {us:.2f} us (floor {floor_us:.2f}, "
                     f"floor/us {floor_us / us:.3f})")
        del words
        if args.plan_copies or args.smem_reads or args.late_boxes or args.split_free:
            rows.extend(fused_rows(n, k, floor_us, copies, args.replays, device))
    progress(f"measured {total} variants x shapes in {time.monotonic() - started:.1f} s")
    setup.close()  # (the buffers above go with this frame)
    return {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "git": git_commit(),
        "copy_TBps": copy_tbps,
        "l2_bytes": setup.l2_bytes,
        "sms": sms,
        "replays": args.replays,
        "rows": rows,
    }


class ChainRig:
    """The chain kernel's device buffers for `shapes` up to max_m tokens and one way to check and time
    a chain variant with them (--chain and --chain-mma): the activations (random bf16 bits, never
    zeros; a NaN pattern is only a bit pattern to these kernels), one uint32 a CTA for the weight and
    the activation checksums, the M x N bf16 output spread over the grid, and with `stamped` thread
    0's stamps of every launch of a replay (CHAIN_STAMPS words a CTA)."""

    def __init__(self, setup: "Setup", shapes, max_m: int, stamped: bool = False):
        import numpy as np

        self.setup = setup
        device, sms = setup.device, setup.sms
        max_k, max_n = max(k for _, k in shapes), max(n for n, _ in shapes)
        act = torch.randint(0, 2 ** 16, (max_m * max_k,), dtype=torch.int32, device=device, generator=setup.generator)
        self.act = act.to(torch.int16)
        self.act_source = self.act.clone()  # what --after copy writes into the activations before every launch
        self.act_words = self.act.cpu().numpy().view("<u4")
        self.out = torch.zeros(sms, dtype=torch.int32, device=device)
        self.act_fold = torch.zeros(sms, dtype=torch.int32, device=device)
        self.outputs = torch.zeros(sms * (-(-(max_m * max_n * 2) // (16 * sms))) * 4, dtype=torch.int32,
                                   device=device)
        max_copies = max(copies for *_, copies in setup.plan)
        self.stamps = (torch.zeros(max_copies * sms * CHAIN_STAMPS, dtype=torch.int64, device=device)
                       if stamped else None)
        self.no_fold = np.zeros(sms, dtype=np.uint32)

    def weight_fold(self, words, nbytes: int):
        """Every CTA's expected weight checksum for one weight copy (`words`): the bulk variant's
        slices and copies, which the chain's are."""
        return expected_fold(Variant("bulk", {"chunk": CHAIN_CHUNK}), words, nbytes, self.setup.sms)

    def measure(self, v: Variant, n: int, k: int, m: int, nbytes: int, stride: int, copies: int, weight_fold,
                replays: int, after: str = "none"):
        """Variant v on the shape's rotated copies at M = m, checked once eagerly (its weight and
        activation checksums against the host's: `weight_fold` where its CTA streams, else 0), then
        timed as bench times the fused op: (geometry, us, checksums ok, the last replay's stamps as
        [copies, grid, CHAIN_STAMPS] or None). after == "copy": a copy kernel writes the activations
        before every launch."""
        import numpy as np

        sms, pool = self.setup.sms, self.setup.pool
        g = chain_geometry(v, n, k, m, nbytes, sms)
        mod = v.params.get("stream_mod", 1)
        want_w = (np.where(np.arange(sms) % mod == 0, weight_fold, 0).astype(np.uint32) if v.params["weight"]
                  else self.no_fold)
        want_a = (expected_act_fold(self.act_words, m, k, sms, g["act_split"]) if v.params["activations"]
                  else self.no_fold)
        for buffer in (self.out, self.act_fold) + ((self.stamps,) if self.stamps is not None else ()):
            buffer.zero_()
        stamp_bytes = sms * CHAIN_STAMPS * 8  # one launch's

        def launch(i):
            if after == "copy":  # a kernel that does not launch its dependents early writes the activations
                self.act.copy_(self.act_source)
            self.setup.kernels.launch_chain(
                v, pool.data_ptr() + i * stride, nbytes, self.out.data_ptr(), self.act.data_ptr(), m, k,
                self.outputs.data_ptr(), self.act_fold.data_ptr(), g,
                self.stamps.data_ptr() + i * stamp_bytes if self.stamps is not None else None)
        us, fold_ok = check_then_time(
            launch, lambda: ((self.out.cpu().numpy().view("<u4") == want_w).all()
                             and (self.act_fold.cpu().numpy().view("<u4") == want_a).all()),
            f"{v.name} on N={n} K={k} M={m}", copies, replays)
        stamps = None
        if self.stamps is not None:
            torch.cuda.synchronize()
            stamps = self.stamps[:copies * sms * CHAIN_STAMPS].view(copies, sms, CHAIN_STAMPS).cpu().numpy()
        return g, us, fold_ok, stamps


def point_row(n: int, k: int, m: int, variant: str, kind: str, params: dict, us: float, copy_tbps: float,
              copies: int, fold_ok=None, pdl: int = 1) -> dict:
    """One measured point of the chain modes, against bench's floor (op_bytes) at the run's copy rate."""
    from sglang_fp8ext.bench import op_bytes

    floor_us = op_bytes(n, k, m, False) / copy_tbps / 1e6
    return {"N": n, "K": k, "M": m, "bytes": op_bytes(n, k, m, False), "variant": variant, "kind": kind,
            "params": params, "pdl": pdl, "us": us, "floor_us": floor_us, "floor_over_us": floor_us / us,
            "fold_ok": fold_ok, "copies": copies}


def run_chain(args) -> dict:
    """--chain: every chain variant at every M of CHAIN_MS on the Qwen shapes, each checked once
    eagerly (its weight and activation checksums against the host's), then timed as bench times
    the fused op; the fused op's own plan at the same points; floors as bench's (op_bytes)."""
    from sglang_fp8ext.bench import QWEN_TP4_SHAPES, git_commit

    variants = chain_variants()
    setup = Setup()
    device, sms, kernels, copy_tbps = setup.device, setup.sms, setup.kernels, setup.copy_tbps
    rig = ChainRig(setup, QWEN_TP4_SHAPES, max(CHAIN_MS))

    rows = []
    total, done = len(setup.plan) * len(CHAIN_MS) * len(variants), 0
    started = time.monotonic()
    for n, k, nbytes, stride, copies in setup.plan:
        words = setup.pool[:nbytes].cpu().numpy().view("<u4")
        weight_fold = rig.weight_fold(words, nbytes)
        for m in CHAIN_MS:
            for v in variants:
                done += 1
                g, us, fold_ok, _ = rig.measure(v, n, k, m, nbytes, stride, copies, weight_fold, args.replays)
                rows.append(point_row(n, k, m, v.name, v.kind, {**v.params, **g}, us, copy_tbps, copies, fold_ok,
                                      v.pdl))
                progress(f"[{done}/{total}] N={n} K={k} M={m} {v.name}: {us:.2f} us "
                         f"(floor/us {rows[-1]['floor_over_us']:.3f})")
            for ref in CHAIN_BULK_REFERENCES:
                want = expected_fold(ref, words, nbytes, sms)
                rig.out.zero_()
                us, fold_ok = check_then_time(
                    lambda i, ref=ref: kernels.launch(ref, setup.pool.data_ptr() + i * stride, nbytes,
                                                      rig.out.data_ptr(), sms),
                    lambda: (rig.out.cpu().numpy().view("<u4") == want).all(),
                    f"{ref.name} on N={n} K={k}", copies, args.replays)
                rows.append(point_row(n, k, m, ref.name + " (reference)", ref.kind, dict(ref.params), us, copy_tbps,
                                      copies, fold_ok))
        del words
        points = [(m, name, config) for name, config in CHAIN_FUSED for m in CHAIN_MS]
        rows += [point_row(n, k, m, name, "fused", {"M": m}, us, copy_tbps, copies)
                 for m, name, _, us in time_fused(n, k, points, copies, args.replays, device)]
    progress(f"measured {total} chain points in {time.monotonic() - started:.1f} s")
    setup.close()  # (the buffers above go with this frame)
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "git": git_commit(),
            "copy_TBps": copy_tbps, "l2_bytes": setup.l2_bytes, "sms": sms, "replays": args.replays, "rows": rows}


def run_chain_mma(args, variants: Optional[List[Variant]] = None, ms=CHAIN_MMA_MS, fused_configs=()) -> dict:
    """--chain-mma (session 30): chain_mma_variants at CHAIN_MMA_MS on the Qwen shapes, each checked
    once eagerly as --chain's, timed as bench times the fused op, then the stamps of the last replay
    summarized (summarize_chain_stamps); the fused op's own plan at the same points. --chain-consume
    (session 32) passes its own variants, Ms and fused configs ([(name, config)])."""
    from sglang_fp8ext.bench import QWEN_TP4_SHAPES, git_commit

    variants = chain_mma_variants() if variants is None else variants
    setup = Setup(args.pool)
    device, sms, copy_tbps = setup.device, setup.sms, setup.copy_tbps
    rig = ChainRig(setup, QWEN_TP4_SHAPES, max(ms), stamped=True)

    rows = []
    total, done = len(setup.plan) * len(ms) * len(variants), 0
    for n, k, nbytes, stride, copies in setup.plan:
        weight_fold = rig.weight_fold(setup.pool[:nbytes].cpu().numpy().view("<u4"), nbytes)
        for m in ms:
            for v in variants:
                done += 1
                g, us, fold_ok, stamps = rig.measure(v, n, k, m, nbytes, stride, copies, weight_fold, args.replays,
                                                     args.after)
                summary = summarize_chain_stamps(stamps, v.params.get("stream_mod", 1))
                rows.append({**point_row(n, k, m, v.name, v.kind, {**v.params, **g}, us, copy_tbps, copies, fold_ok,
                                         v.pdl), "stamps": summary})
                progress(f"[{done}/{total}] N={n} K={k} M={m} {v.name}: {us:.2f} us, SM clock "
                         f"{summary['sm_clock_mhz']:.0f} MHz, loads {summary['activation_latency_us']:.2f} us")
        points = [(m, "fused default", None) for m in ms]
        if args.after == "none" and not fused_configs:
            points += [(m, f"fused default, {CHAIN_FUSED_ROUNDS * copies} calls a graph", CHAIN_FUSED_ROUNDS)
                       for m in ms]
        points += [(m, name, config) for name, config in fused_configs for m in ms]
        rows += [point_row(n, k, m, name, "fused", {"M": m}, us, copy_tbps, copies)
                 for m, name, _, us in time_fused(n, k, points, copies, args.replays, device, args.after)]
    setup.close()
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "git": git_commit(),
            "copy_TBps": copy_tbps, "l2_bytes": setup.l2_bytes, "sms": sms, "replays": args.replays,
            "after": args.after, "pool": args.pool, "rows": rows}


def print_chain_mma_tables(result: dict) -> None:
    """One table per shape and M: each variant's time, floor/us and its stamps' medians (µs)."""
    print(f"\n{result['device']}  torch {result['torch']}  git {result['git'][:12]}"
          f"  copy {result['copy_TBps']:.2f} TB/s  (median of {result['replays']} graph replays; stamps: medians over "
          f"CTAs and launches {CHAIN_STAMP_SKIP}.. of the last replay)"
          + ("  each launch after a copy kernel that writes the activations: the times are the pair's"
             if result.get("after") == "copy" else ""))
    cols = [("sm_clock_mhz", "MHz", 6, 0), ("early_issue_us", "issue", 6, 2), ("late_issue_us", "rel>late", 9, 2),
            ("entry_to_release_us", "entry>rel", 10, 2),
            ("activation_latency_us", "loads", 7, 2), ("activation_latency_p90_us", "p90", 6, 2),
            ("release_to_landed_us", "rel>land", 9, 2), ("landed_to_exit_us", "land>exit", 10, 2),
            ("release_spread_us", "spread", 7, 2), ("release_to_next_release_us", "rel>rel", 8, 2)]
    for n, k in dict.fromkeys((r["N"], r["K"]) for r in result["rows"]):
        for m in sorted({r["M"] for r in result["rows"] if (r["N"], r["K"]) == (n, k)}):
            print(f"\nN={n} K={k} M={m}")
            print(f"{'variant':<78}{'us':>7}{'fl/us':>7}" + "".join(f"{c[1]:>{c[2]}}" for c in cols))
            for r in (r for r in result["rows"] if (r["N"], r["K"], r["M"]) == (n, k, m)):
                st = r.get("stamps") or {}
                cells = "".join(f"{st[c[0]]:>{c[2]}.{c[3]}f}" if st.get(c[0]) is not None else f"{'-':>{c[2]}}"
                                for c in cols)
                extra = ""
                if st.get("chunk_landed_us"):
                    extra += "  chunks landed " + " ".join(f"{t:.2f}" for t in st["chunk_landed_us"])
                if "activation_latency_streaming_us" in st:
                    extra += (f"  loads: streaming {st['activation_latency_streaming_us']:.2f},"
                             f" not {st['activation_latency_not_streaming_us']:.2f}")
                flag = "" if r["fold_ok"] in (None, True) else "  MISMATCH"
                print(f"{r['variant']:<78}{r['us']:>7.2f}{r['floor_over_us']:>7.3f}" + cells + extra + flag)


def print_chain_tables(result: dict) -> None:
    """One table per shape: variants x M, floor/us (and, at the foot, the geometric mean of each
    variant over the 15 points, the bench target's measure)."""
    rows = result["rows"]
    print(f"\n{result['device']}  torch {result['torch']}  git {result['git'][:12]}"
          f"  copy {result['copy_TBps']:.2f} TB/s  (median of {result['replays']} graph replays, cold rotated copies;"
          " floor/us, us in brackets)")
    names = list(dict.fromkeys(r["variant"] for r in rows))
    shapes = list(dict.fromkeys((r["N"], r["K"]) for r in rows))
    ms = sorted({r["M"] for r in rows})
    at = {(r["N"], r["K"], r["M"], r["variant"]): r for r in rows}
    for n, k in shapes:
        print(f"\nN={n} K={k}")
        print(f"{'variant':<52}" + "".join(f"{'M=' + str(m):>16}" for m in ms))
        for name in names:
            cells = [at.get((n, k, m, name)) for m in ms]
            print(f"{name:<52}" + "".join(f"{c['floor_over_us']:>7.3f} ({c['us']:>5.2f})" if c else f"{'-':>16}"
                                          for c in cells)
                  + ("" if all(c is None or c["fold_ok"] in (None, True) for c in cells) else "  MISMATCH"))
    print(f"\ngeometric mean of floor/us over {len(shapes) * len(ms)} points:")
    for name in names:
        sel = [r["floor_over_us"] for r in rows if r["variant"] == name]
        if len(sel) == len(shapes) * len(ms):
            print(f"  {name:<52} {math.exp(sum(math.log(x) for x in sel) / len(sel)):.3f}")


def time_fused(n: int, k: int, points, copies: int, replays: int, device, after: str = "none") -> List[tuple]:
    """Each (M, name, config) point of the fused op (config None: `smallm_gemm`, its own plan; an
    int r: its own plan in a graph of r rounds over the copies, each copy still cold when its turn
    comes again (session 30: what a replay's fixed cost adds a call); else the configured op) timed
    as the variants above, over `copies` rotated weights: [(M, name, config, us)]. Empty where the
    extension is not built. One activation tensor per M; after == "copy": a copy kernel writes it
    before every call (the pair is timed)."""
    try:
        from sglang_fp8ext import ops
        from sglang_fp8ext.bench import make_weight, time_in_graph
        torch.ops.sgl_fp8._smallm_gemm_configured  # noqa: B018 (raises where the op is missing)
    except (ImportError, AttributeError, RuntimeError) as e:
        progress(f"  fused rows skipped: {e}")
        return []
    generator = torch.Generator(device=device).manual_seed(1)
    weights = [make_weight(n, k, False, device, generator) for _ in range(copies)]
    activations, timed = {}, []
    for m, name, config in points:
        if m not in activations:
            activations[m] = torch.randn(m, k, generator=generator, device=device).to(torch.bfloat16)
        x = activations[m]
        x_source = x.clone()
        before = (lambda: x.copy_(x_source)) if after == "copy" else (lambda: None)
        if config is None or isinstance(config, int):
            calls = [lambda w=w, s=s: (before(), ops.smallm_gemm(x, w, s)) for w, s, _ in weights] * (config or 1)
        else:
            calls = [lambda w=w, s=s, c=config: (before(),
                                                 torch.ops.sgl_fp8._smallm_gemm_configured(x, w, s, False, None, c))
                     for w, s, _ in weights]
        us = time_in_graph(calls, replays)
        progress(f"  N={n} K={k} {name} M={m}: {us:.2f} us")
        timed.append((m, name, config, us))
    del weights
    torch.cuda.empty_cache()
    return timed


# The fused op's copies-alone diagnostic: config flag 7 (no MMA, no prologue, no epilogue; garbage output).
COPIES_ALONE = [0, 0, 0, 0, 7]


def fused_rows(n: int, k: int, floor_us: float, copies: int, replays: int, device) -> List[dict]:
    """The fused op (default plan) and its copies alone at M = 1 and 8."""
    points = [(m, name, config) for m in (1, 8)
              for name, config in (("fused default", None), ("fused copies alone (flag 7)", COPIES_ALONE))]
    return [{"N": n, "K": k, "bytes": n * k, "variant": f"{name} M={m}", "kind": "fused",
             "params": {"M": m, "config": config}, "pdl": 1, "us": us, "floor_us": floor_us,
             "floor_over_us": floor_us / us, "fold_ok": None, "copies": copies}
            for m, name, config, us in time_fused(n, k, points, copies, replays, device)]


def print_tables(result: dict) -> None:
    print(f"\n{result['device']}  torch {result['torch']}  git {result['git'][:12]}  "
          f"copy {result['copy_TBps']:.2f} TB/s  L2 {result['l2_bytes'] / 1e6:.1f} MB  "
          f"(median of {result['replays']} graph replays, cold rotated copies)")
    shapes = []
    for r in result["rows"]:
        if (r["N"], r["K"]) not in shapes:
            shapes.append((r["N"], r["K"]))
    for n, k in shapes:
        sel = sorted((r for r in result["rows"] if (r["N"], r["K"]) == (n, k)), key=lambda r: r["us"])
        print(f"\nN={n} K={k}: {sel[0]['bytes'] / 1e6:.2f} MB weight + fp32 scales, {sel[0]['copies']} copies")
        header = f"{'variant':<40} {'us':>8} {'floor_us':>9} {'floor/us':>9} {'TB/s':>6}  check"
        print(header)
        print("-" * len(header))
        for r in sel:
            print(f"{r['variant']:<40} {r['us']:>8.2f} {r['floor_us']:>9.2f} {r['floor_over_us']:>9.3f} "
                  f"{r['bytes'] / r['us'] / 1e6:>6.2f}  {'-' if r['fold_ok'] is None else 'ok' if r['fold_ok'] else 'MISMATCH'}")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for stream_ceiling.json")
    parser.add_argument("--quick", action="store_true", help="4 variants instead of the full sweep")
    parser.add_argument("--copy-sizes", action="store_true", help="bulk copies of 2-32 KB at the same bytes in flight")
    parser.add_argument("--ldg-residency", action="store_true",
                        help="the ldg kernels as they are and with their CTAs an SM capped at the grid's, so the next "
                        "launch's CTAs cannot start beside them (session 36)")
    parser.add_argument("--plan-copies", action="store_true",
                        help="the fused kernel's copy pattern piece by piece, beside bulk copies and the fused op")
    parser.add_argument("--smem-reads", action="store_true",
                        help="the fused kernel's copies with its warpgroups reading each landed block: its MMAs, "
                        "one window, the weight as wgmma's B operand, one window + an mma.sync fifth tile "
                        "(session 23)")
    parser.add_argument("--late-boxes", action="store_true",
                        help="the copies after griddepcontrol.wait in boxes of 1-2 K blocks, with and without "
                        "the MMAs (session 27)")
    parser.add_argument("--split-free", action="store_true",
                        help="the copies of plans without a K split (CTAs of 2-3 tiles) beside the landed plan's "
                        "(session 27)")
    parser.add_argument("--chain", action="store_true",
                        help="the weight stream with the activation loads and output stores every GEMM needs, "
                        "no arithmetic, in every order, at M = 1-32 beside the fused op (session 29)")
    parser.add_argument("--chain-mma", action="store_true",
                        help="the chain with bursts of wgmma at entry or after the landing, and thread 0's clocks and "
                        "stamps: the SM clock and the activation loads' latency (session 30)")
    parser.add_argument("--chain-consume", action="store_true",
                        help="the chain with its share multiplied as it lands by wgmma (every byte read once, or "
                        "twice), beside the fused op with every copy at entry (session 32)")
    parser.add_argument("--chain-timed", action="store_true",
                        help="the chain with its copies requested on a clock by a producer warp, with and without "
                        "its share multiplied as it lands, beside the fused op's stream and MMAs (session 33)")
    parser.add_argument("--after", choices=["none", "copy"], default="none",
                        help="--chain-mma / --chain-consume / --chain-timed: a copy kernel that writes the activations "
                        "before every launch, as in a decode step (the times are the pair's)")
    parser.add_argument("--pool", choices=["random", "e4m3"], default="random",
                        help="--chain-mma / --chain-consume / --chain-timed: the weight copies' bytes, random (default) or "
                        "e4m3 values of 0.5 x a normal draw, as bench's weights (session 32)")
    parser.add_argument("--replays", type=int, default=20, help="graph replays per figure (default 20)")
    parser.add_argument("--compile-only", action="store_true",
                        help="build and load the kernels, then exit (no GPU needed)")
    args = parser.parse_args(argv)

    if args.compile_only:
        with tempfile.TemporaryDirectory(prefix="stream_ceiling_") as tmp:
            Kernels(build_library(tmp))
        print("stream_ceiling: kernels built and loaded")
        return 0
    if not torch.cuda.is_available():
        print("stream_ceiling: no CUDA device here; this tool measures the GPU only (run it on the GPU "
              "machine). Nothing measured, nothing written.")
        return 0

    stamped_modes = args.chain_mma or args.chain_consume or args.chain_timed
    if args.after != "none" and not stamped_modes:
        parser.error("--after applies to --chain-mma, --chain-consume and --chain-timed only")
    if args.pool != "random" and not stamped_modes:
        parser.error("--pool applies to --chain-mma, --chain-consume and --chain-timed only")
    os.makedirs(args.out, exist_ok=True)
    if args.chain_timed:
        result = run_chain_mma(args, chain_timed_variants(), CHAIN_TIMED_MS, CHAIN_TIMED_FUSED)
        print_chain_mma_tables(result)
        write_result(args.out, "stream_ceiling.json", result)
        return 0
    if args.chain_consume:
        result = run_chain_mma(args, chain_consume_variants(), CHAIN_CONSUME_MS, CHAIN_CONSUME_FUSED)
        print_chain_mma_tables(result)
        write_result(args.out, "stream_ceiling.json", result)
        return 0
    if args.chain_mma:
        result = run_chain_mma(args)
        print_chain_mma_tables(result)
        write_result(args.out, "stream_ceiling.json", result)
        return 0
    if args.chain:
        result = run_chain(args)
        print_chain_tables(result)
        write_result(args.out, "stream_ceiling.json", result)
        return 0
    result = run(args)
    print_tables(result)
    write_result(args.out, "stream_ceiling.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
