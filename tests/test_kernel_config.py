"""The typed kernel configuration (sglang_fp8ext/kernel_config.py): its round trips (op arguments,
table JSON, candidate labels), its validation, and that it agrees with the C++ definition the
launchers read (``GemmConfig`` in kernels/common/gpu_launch.h): the same fields in the same order,
the same engine values, the same interface version."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from sglang_fp8ext import bench, kernel_config, tune
from sglang_fp8ext.kernel_config import (
    DEFAULT,
    KERNEL_INTERFACE_VERSION,
    MAX_KNOB,
    Engine,
    KernelConfig,
    Toggle,
    field_names,
    parse_label,
)

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "kernels" / "common" / "gpu_launch.h"
FIELDS = ("engine", "k_split", "copy_blocks", "early_copies", "pair_activations", "ctas_per_sm", "staging_stages",
          "tiles_per_wave")
KEPT_ENGINES = {Engine.WGMMA, Engine.GENERAL, Engine.REGISTER_FED}

SAMPLES = (
    KernelConfig(),
    KernelConfig(engine=Engine.WGMMA),
    KernelConfig(engine=Engine.GENERAL, staging_stages=2, ctas_per_sm=2),
    KernelConfig(engine=Engine.REGISTER_FED),
    KernelConfig(k_split=4),
    KernelConfig(copy_blocks=2, early_copies=3, pair_activations=Toggle.ON),
    KernelConfig(pair_activations=Toggle.OFF, k_split=1),
    KernelConfig(tiles_per_wave=2, k_split=8),
    KernelConfig(Engine.GENERAL, 2, 3, 4, Toggle.OFF, 5, 6, MAX_KNOB - 1),  # every field set
)


def test_fields_and_defaults():
    assert field_names() == FIELDS
    assert [f.name for f in dataclasses.fields(KernelConfig)] == list(FIELDS)
    d = KernelConfig()
    assert d == DEFAULT and d.is_default
    assert d.op_args() == [0] * len(FIELDS)  # zero everywhere: the kernel's own plan
    assert d.to_json() == {} and d.label() == "fused"
    assert d.engine is Engine.AUTO and d.pair_activations is Toggle.AUTO
    assert {e.name: int(e) for e in Engine} == {"AUTO": 0, "WGMMA": 1, "GENERAL": 2, "REGISTER_FED": 3}
    assert {t.name: int(t) for t in Toggle} == {"AUTO": 0, "ON": 1, "OFF": 2}
    assert not KernelConfig(k_split=1).is_default


@pytest.mark.parametrize("config", SAMPLES, ids=lambda c: c.label())
def test_round_trips(config):
    args = config.op_args()
    assert len(args) == len(FIELDS) and all(type(a) is int for a in args)  # plain ints for the op's int[]
    assert KernelConfig.from_op_args(args) == config
    assert KernelConfig.from_op_args(tuple(args)) == config  # Choice.config holds a tuple
    data = config.to_json()
    assert KernelConfig.from_json(json.loads(json.dumps(data))) == config  # through the file
    assert all(v != 0 and v != "auto" for v in data.values())  # only the fields that differ from the defaults
    assert parse_label(config.label()) == config
    assert hash(config) == hash(KernelConfig.from_op_args(args))


def test_json_and_label_forms():
    assert KernelConfig(engine=Engine.REGISTER_FED).to_json() == {"engine": "register_fed"}
    assert KernelConfig(k_split=4).to_json() == {"k_split": 4}
    assert KernelConfig(k_split=4).label() == "fused(k_split=4)"
    assert KernelConfig(engine=Engine.GENERAL, staging_stages=2).label() == "fused(engine=general,staging_stages=2)"
    assert KernelConfig(pair_activations=Toggle.OFF).to_json() == {"pair_activations": "off"}
    assert KernelConfig(engine=Engine.REGISTER_FED).op_args() == [3, 0, 0, 0, 0, 0, 0, 0]
    assert KernelConfig(k_split=2, pair_activations=Toggle.ON).op_args() == [0, 2, 0, 0, 1, 0, 0, 0]
    # names or values for the enums, as a hand-written table might give them
    assert KernelConfig.from_json({"engine": "general"}) == KernelConfig(engine=Engine.GENERAL)
    assert KernelConfig.from_json({"engine": 3}) == KernelConfig(engine=Engine.REGISTER_FED)
    assert KernelConfig.from_json({"engine": "auto", "k_split": 0}).is_default
    assert KernelConfig.from_json({}) == DEFAULT
    for other in ("scaled_mm", "unfused", "aiter", "fused[2,0,0,0,0]", "fusedx"):
        assert parse_label(other) is None, other


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.k_split = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"warps": 4}, r"unknown kernel config field\(s\) \['warps'\]"),
        ({"flags": 32768}, r"unknown kernel config field\(s\) \['flags'\]"),
        ({"engine": "mma_sync"}, r"KernelConfig\.engine must be one of"),
        ({"engine": 4}, r"KernelConfig\.engine must be one of"),
        ({"engine": True}, r"KernelConfig\.engine must be one of"),
        ({"pair_activations": "yes"}, r"KernelConfig\.pair_activations must be one of"),
        ({"pair_activations": 3}, r"KernelConfig\.pair_activations must be one of"),
        ({"k_split": -1}, r"KernelConfig\.k_split must be an integer in \[0, 65536\)"),
        ({"copy_blocks": MAX_KNOB}, r"KernelConfig\.copy_blocks must be an integer"),
        ({"ctas_per_sm": 2.0}, r"KernelConfig\.ctas_per_sm must be an integer"),
        ({"staging_stages": "2"}, r"KernelConfig\.staging_stages must be an integer"),
        ({"tiles_per_wave": True}, r"KernelConfig\.tiles_per_wave must be an integer"),
        ({"early_copies": None}, r"KernelConfig\.early_copies must be an integer"),
        ([0, 0, 0, 0, 32768], r"a kernel config is an object of named fields"),
        ("fused", r"a kernel config is an object of named fields"),
    ],
)
def test_validation(data, message):
    with pytest.raises(ValueError, match=message):
        KernelConfig.from_json(data)


def test_validation_of_constructor_and_op_args():
    with pytest.raises(ValueError, match=r"k_split"):
        KernelConfig(k_split=-2)
    with pytest.raises(ValueError, match=r"engine"):
        KernelConfig(engine=9)
    with pytest.raises(ValueError, match=r"8 fields"):
        KernelConfig.from_op_args([0, 0, 0, 0, 256])  # a format-1 positional list
    with pytest.raises(ValueError, match=r"8 fields"):
        KernelConfig.from_op_args([0] * 9)
    with pytest.raises(ValueError, match=r"engine"):
        KernelConfig.from_op_args([5, 0, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match=r"unknown kernel config field"):
        parse_label("fused(warps=4)")
    with pytest.raises(ValueError, match=r"engine"):
        parse_label("fused(engine=mma_sync)")


def test_tune_and_bench_configs_are_typed_and_distinct():
    for configs in (tune.CONFIGS, bench.DIAGNOSTIC_CONFIGS):
        assert configs and all(isinstance(c, KernelConfig) for c in configs)
        labels = [c.label() for c in configs]
        assert len(set(labels)) == len(labels), labels
        assert "fused" not in labels  # the plan itself is the plain "fused" candidate / the bench row
        for c in configs:
            assert c.engine is Engine.AUTO or c.engine in KEPT_ENGINES
            assert parse_label(c.label()) == c
    engines = {c.engine for c in tune.CONFIGS}
    assert {Engine.GENERAL, Engine.REGISTER_FED} <= engines  # the engines the plan does not take by itself


# ---- the C++ side -----------------------------------------------------------------------------------


def _header_text() -> str:
    text = HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _enum(text: str, name: str) -> dict:
    m = re.search(r"enum\s+class\s+" + name + r"\b[^{]*\{([^}]*)\}", text)
    assert m, f"no enum class {name} in {HEADER}"
    out = {}
    for item in m.group(1).split(","):
        item = item.strip()
        if not item:
            continue
        em = re.fullmatch(r"(\w+)\s*=\s*(\d+)", item)
        assert em, f"{name}: enumerator {item!r} has no explicit value"
        out[em.group(1)] = int(em.group(2))
    return out


def _constant(text: str, name: str) -> int:
    m = re.search(r"constexpr\s+(?:int|int32_t|int64_t)\s+" + name + r"\s*=\s*(\d+)\s*;", text)
    assert m, f"no constexpr int {name} in {HEADER}"
    return int(m.group(1))


def _python_name(enumerator: str) -> str:
    """kRegisterFed -> REGISTER_FED."""
    assert enumerator.startswith("k") and enumerator[1:2].isupper(), enumerator
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enumerator[1:]).upper()


def test_header_gemm_config_matches_kernel_config():
    """GemmConfig (C++, what the launchers read) and KernelConfig (Python, what dispatch, tune and
    the tables speak) are one definition: the op passes KernelConfig.op_args() positionally, so a
    field added, removed or reordered on one side only would silently mean another knob."""
    text = _header_text()
    m = re.search(r"struct\s+GemmConfig\s*\{(.*?)\}\s*;", text, flags=re.S)
    assert m, f"no struct GemmConfig in {HEADER}"
    members = []
    for decl in m.group(1).split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        dm = re.fullmatch(r"([\w:]+)\s+(\w+)\s*(?:=\s*(.+)|\{\s*(.*)\s*\})?", decl)
        assert dm, f"GemmConfig: cannot read the member {decl!r}"
        members.append((dm.group(1), dm.group(2)))
    assert tuple(name for _, name in members) == field_names()
    types = dict((name, ctype) for ctype, name in members)
    assert types["engine"].split("::")[-1] == "GemmEngine"
    assert types["pair_activations"].split("::")[-1] == "Toggle"
    for f in dataclasses.fields(KernelConfig):
        if f.type == "int":
            assert types[f.name] == "int32_t", (f.name, types[f.name])
    assert _constant(text, "kGemmConfigFields") == len(field_names()) == len(DEFAULT.op_args())
    assert _constant(text, "kKernelInterfaceVersion") == KERNEL_INTERFACE_VERSION


def test_header_enums_match():
    text = _header_text()
    engines = _enum(text, "GemmEngine")
    assert {_python_name(k): v for k, v in engines.items()} == {e.name: int(e) for e in Engine}
    assert engines == {"kAuto": 0, "kWgmma": 1, "kGeneral": 2, "kRegisterFed": 3}
    toggles = _enum(text, "Toggle")
    assert {_python_name(k): v for k, v in toggles.items()} == {t.name: int(t) for t in Toggle}


def test_module_docstring_names_the_header():
    assert "kernels/common/gpu_launch.h" in kernel_config.__doc__
