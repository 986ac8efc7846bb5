"""The fused GEMM's kernel configuration, typed: which engine runs a call and its named knobs.

One definition on each side of the op boundary: ``GemmConfig`` in ``kernels/common/gpu_launch.h``
(C++, read by the launchers) and :class:`KernelConfig` here (Python, read by dispatch, tune, bench,
check and the tables). They cross the private op ``sgl_fp8::_smallm_gemm_configured`` as the list
:meth:`KernelConfig.op_args`, one integer per field in declaration order; a test reads the C++
struct and fails when the two definitions disagree. Zero in every field is the kernel's own plan.

In a table (``configs/*.json``) a config is an object naming only the fields that differ from
their defaults, e.g. ``{"engine": "register_fed"}`` or ``{"k_split": 4}``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping, Optional, Tuple

# Bumped whenever a field, an engine or the meaning of a value changes: a tuned table records the
# version it was measured with and is ignored (with a warning) by a build of another version.
KERNEL_INTERFACE_VERSION = 2


class Engine(enum.IntEnum):
    """The GEMM engine. sm_90 has three (docs/design/sm90.md); gfx950 has one and ignores this."""

    AUTO = 0  # the backend's plan decides
    WGMMA = 1  # sm_90 wgmma ring kernel: plain weights, M <= 32
    GENERAL = 2  # sm_90 general kernel: any M, plain or shuffled weights
    REGISTER_FED = 3  # sm_90 register-fed kernel: plain weights, K % 1024 == 0, K <= 8192, M <= 16


class Toggle(enum.IntEnum):
    AUTO = 0
    ON = 1
    OFF = 2


# Upper bound of every integer knob: what the launchers accept (GemmConfig's fields are int32).
MAX_KNOB = 1 << 16


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """A fused-GEMM configuration; every field's zero is "the plan decides"."""

    engine: Engine = Engine.AUTO
    k_split: int = 0  # sm_90: CTAs of a cluster splitting K; gfx950: waves splitting K
    copy_blocks: int = 0  # sm_90 wgmma: K blocks per copy (0: ~32 KB; from 9 tokens >= 2 copies)
    early_copies: int = 0  # sm_90 wgmma: copies requested before the activations are read (0: half)
    pair_activations: Toggle = Toggle.AUTO  # sm_90 wgmma, 9-32 tokens: two row groups share a K slice's quant
    ctas_per_sm: int = 0  # sm_90 general: CTAs per SM the grid is sized for (0: one)
    staging_stages: int = 0  # sm_90 general: cp.async staging stages per thread (0: the plan's)
    tiles_per_wave: int = 0  # gfx950: 16-row tiles a wave handles per pass (1 or 2; 0: the plan's)

    def __post_init__(self):
        object.__setattr__(self, "engine", _enum(Engine, self.engine, "engine"))
        object.__setattr__(self, "pair_activations", _enum(Toggle, self.pair_activations, "pair_activations"))
        for f in dataclasses.fields(self):
            if f.type == "int":
                v = getattr(self, f.name)
                if not (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_KNOB):
                    raise ValueError(f"KernelConfig.{f.name} must be an integer in [0, {MAX_KNOB}), got {v!r}")

    @property
    def is_default(self) -> bool:
        return self == DEFAULT

    def op_args(self) -> list:
        """The integers ``_smallm_gemm_configured`` takes: one per field, in declaration order."""
        return [int(getattr(self, f.name)) for f in dataclasses.fields(self)]

    def to_json(self) -> dict:
        """The table form: the fields that differ from their defaults, enums by name."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v != f.default:
                out[f.name] = v.name.lower() if isinstance(v, enum.Enum) else v
        return out

    @classmethod
    def from_op_args(cls, args) -> "KernelConfig":
        """Inverse of :meth:`op_args`."""
        names = field_names()
        if len(args) != len(names):
            raise ValueError(f"a kernel config has {len(names)} fields {list(names)}, got {list(args)}")
        return cls(**dict(zip(names, (int(a) for a in args))))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "KernelConfig":
        """Inverse of :meth:`to_json`; raises ValueError on an unknown field or value."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a kernel config is an object of named fields, got {data!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown kernel config field(s) {unknown}; known: {sorted(names)}")
        return cls(**dict(data))

    def label(self) -> str:
        """A short stable name, e.g. ``fused`` or ``fused(engine=register_fed,k_split=1)``."""
        fields = self.to_json()
        if not fields:
            return "fused"
        return "fused(" + ",".join(f"{k}={v}" for k, v in fields.items()) + ")"


def _enum(kind, value, name):
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return kind(value)
        except ValueError:
            pass
    raise ValueError(f"KernelConfig.{name} must be one of {[m.name.lower() for m in kind]}, got {value!r}")


DEFAULT = KernelConfig()


def field_names() -> Tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(KernelConfig))


def parse_label(text: str) -> Optional[KernelConfig]:
    """Inverse of :meth:`KernelConfig.label` (None for a label that is not a fused config)."""
    if text == "fused":
        return DEFAULT
    if not (text.startswith("fused(") and text.endswith(")")):
        return None
    data = {}
    for item in text[len("fused("):-1].split(","):
        key, _, value = item.partition("=")
        data[key] = int(value) if value.isdigit() else value
    return KernelConfig.from_json(data)
