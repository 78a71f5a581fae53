"""Options of the torch.compile backend: `mode` and `options` as the user passed them.

    torch.compile(model, backend="tessera", mode="max-autotune",
                  options={"verbose": True, "anchor_measure": True})

Every option is validated here, so a typo is a clear error at torch.compile time instead of a
silently ignored setting.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Optional, Union

TUNE_MODES = ("default", "construct", "search")
TUNE_SCOPES = ("automatic", "every")
SCHEDULERS = ("gradient", "round-robin")

# torch.compile modes and what they mean for Tessera. Modes that only concern CUDA graphs
# ("reduce-overhead") keep the default tuning.
MODES = {
    None: None,
    "default": None,
    "reduce-overhead": None,
    "max-autotune": "search",
    "max-autotune-no-cudagraphs": "search",
}


@dataclasses.dataclass(frozen=True)
class Options:
    # Schedule source: "construct" (default) runs Gensor's construct mode on kernels with enough
    # summation work to gain from it (matmul, conv, large reductions; about a second each, once:
    # the result goes to the records database) and gives the others the default heuristics;
    # "default" uses the heuristics everywhere; "search" (mode="max-autotune") runs search mode
    # (evolutionary search with a learned cost model, minutes per kernel) on the same kernels.
    tune: str = "construct"
    # Which kernels the tuning mode tunes: "automatic" (the default, and mode="max-autotune"'s)
    # tunes those whose tuning can pay back (enough summation work, or a large share of their
    # graph's: the C++ TuningPolicy); "every" tunes them all: what giving the `tune` option
    # asks for.
    tune_scope: str = "automatic"
    verbose: bool = False          # log each compiled graph's partitions and choices
    fallback: bool = True          # run the graph eagerly (logged) if compiling it fails
    # Choose each partition's implementation by measurement: Tessera's fused kernel, ATen's
    # matmul/conv + a Tessera kernel for the rest, or ATen only (anchor.py). False: always
    # Tessera's fused kernels (for testing them; can be slower than eager).
    anchor_measure: bool = True
    # Tuning-records database (records.py): tuned schedules and measured choices are stored
    # there and reused by later processes. None or True: $TESSERA_RECORDS_DB, else
    # ~/.cache/tessera/records.db; a path: that file; False: no database.
    records_db: Union[str, bool, None] = None
    # Search mode's measured candidates per kernel; 0: the tuning policy's search_trials.
    trials: int = 0
    # Search mode: a tqdm progress bar per searched kernel (each trial is also logged on the
    # "tessera.search" logger either way).
    progress: bool = True
    # Search mode over a whole graph: how the task scheduler gives measurement rounds to its
    # kernels: "gradient" (Ansor's: where the graph's latency drops most) or "round-robin".
    scheduler: str = "gradient"
    # Where search mode measures candidates: None (the policy's: forked worker processes, so a
    # crashing candidate cannot take the process down), "workers", "in-process", or a Ray
    # cluster: "ray" (a local instance or the one this process joined), "auto", "ray://host:port".
    runner: Optional[str] = None
    # Inference graphs: weights (the module's parameters and buffers) that a kernel packs into
    # panels are packed once and reused across calls, as Inductor's freezing does; a weight
    # changed in place (its version counter moves) is packed again before the next call reads
    # it. False: kernels pack their operands on every call.
    prepack_weights: bool = True
    # Search mode over a whole graph: ETO's program reuse. Kernels whose loop nests another
    # kernel's dominates (or is dominated by) are tuned from that kernel's tuned program with a
    # narrow search instead of a full one, where the reuse selection says that costs fewer
    # measurements; the log says which kernel reused which.
    reuse: bool = True
    # EinNet: convolution partitions are also offered the program derivation finds for the
    # convolution (e.g. a matmul plus an offset-reduce), as one more measured candidate.
    derive: bool = False
    # ALT's layout propagation at graph level: convolution outputs and the activations computed
    # from them are stored NHWC (activation_layout.py), so kernels write and read channel
    # vectors contiguously; graph inputs and outputs keep eager's strides. None (the default):
    # on for graphs with a depthwise convolution, which vectorises along channels only in NHWC
    # (MobileNetV2 1.17x faster with it, ResNet-18 0.87x: its dense convs run best in NCHW).
    layouts: Optional[bool] = None
    # Graphs traced with dynamic shapes (dynamic=True, mark_dynamic): one plan whose kernels
    # take their sizes at run time serves every size in range (symbolic.py); the range of a
    # size is Dynamo's, narrowed by the one declared here, keyed by the input dimension
    # ("input_ids.size(1)") or "*" for all: {"input_ids.size(1)": (1, 512)}. Kept as sorted
    # (key, (lo, hi)) pairs. A call outside the range gets a plan for its own shapes.
    dynamic_ranges: tuple = ()
    # False: graphs with dynamic shapes get one plan per input signature instead (every new
    # size plans and may compile kernels again).
    symbolic: bool = True


_DESCRIPTIONS = {
    "tune": "'default' | 'construct' | 'search'",
    "tune_scope": "'automatic' | 'every' (default: 'every' where 'tune' is given)",
    "verbose": "bool",
    "fallback": "bool",
    "anchor_measure": "bool",
    "records_db": "path, True/None (default location) or False (off)",
    "trials": "int >= 0 (search mode's measurements per kernel; 0: the policy's default)",
    "progress": "bool (search mode's progress bars)",
    "scheduler": "'gradient' | 'round-robin' (search mode's task scheduler)",
    "runner": "None | 'workers' | 'in-process' | 'ray' | 'auto' | 'ray://host:port'",
    "prepack_weights": "bool (inference: weights packed once, repacked when changed in place)",
    "reuse": "bool (search mode over a graph: kernels tuned from other kernels' programs)",
    "derive": "bool (EinNet derivations offered to convolution partitions)",
    "layouts": "None | bool (ALT: True: each convolution's activations stored NHWC or NCHW, "
               "whichever measures faster, propagated through the graph; None: NHWC, "
               "propagated, where the graph has a depthwise convolution)",
    "dynamic_ranges": "dict: input dimension ('x.size(1)') or '*' -> (lo, hi) size range",
    "symbolic": "bool (dynamic shapes: one plan over a range of sizes, not one per size)",
}
VALID_OPTIONS = tuple(_DESCRIPTIONS)


def _valid_list() -> str:
    return ", ".join(f"{k} ({v})" for k, v in _DESCRIPTIONS.items())


def _parse_ranges(value: Any) -> tuple:
    """{"x.size(1)": (lo, hi)} -> sorted ((key, (lo, hi)), ...), validated."""
    if not isinstance(value, Mapping):
        raise ValueError(f"tessera: option 'dynamic_ranges' must be a dict, got {value!r}")
    out = []
    for key, rng in value.items():
        ok = isinstance(key, str) and isinstance(rng, (tuple, list)) and len(rng) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in rng) and 0 <= rng[0] <= rng[1]
        if not ok:
            raise ValueError(f"tessera: option 'dynamic_ranges': {key!r}: {rng!r} is not a "
                             f"(lo, hi) range of sizes with 0 <= lo <= hi")
        out.append((key, (int(rng[0]), int(rng[1]))))
    return tuple(sorted(out))


def parse_options(mode: Optional[str] = None,
                  options: Optional[Mapping[str, Any]] = None) -> Options:
    """Validates torch.compile's `mode` and `options` and returns the backend's Options."""
    if mode not in MODES:
        raise ValueError(f"tessera: unknown mode {mode!r}; valid modes: "
                         f"{', '.join(repr(m) for m in MODES if m is not None)}")
    values = {}
    if MODES[mode] is not None:
        values["tune"] = MODES[mode]
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise TypeError(f"tessera: options must be a dict, got {type(options).__name__}")
    unknown = sorted(set(options) - set(VALID_OPTIONS))
    if unknown:
        raise TypeError(f"tessera: unknown option(s) {', '.join(map(repr, unknown))}; "
                        f"valid options: {_valid_list()}")
    for key, value in options.items():
        if key == "tune":
            if value not in TUNE_MODES:
                raise ValueError(f"tessera: option 'tune' must be one of {TUNE_MODES}, "
                                 f"got {value!r}")
        elif key == "tune_scope":
            if value not in TUNE_SCOPES:
                raise ValueError(f"tessera: option 'tune_scope' must be one of {TUNE_SCOPES}, "
                                 f"got {value!r}")
        elif key == "records_db":
            if isinstance(value, bool) or value is None:
                value = None if value is True else value
            elif isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
                value = os.fsdecode(value)
            else:
                raise ValueError(f"tessera: option 'records_db' must be a path, True/None or "
                                 f"False, got {value!r}")
            if value == "":
                raise ValueError("tessera: option 'records_db' is an empty path (use False to "
                                 "turn the database off)")
        elif key == "runner":
            if value is not None and not (isinstance(value, str) and (
                    value in ("workers", "in-process", "ray", "auto")
                    or value.startswith("ray://"))):
                raise ValueError(f"tessera: option 'runner' must be one of None, 'workers', "
                                 f"'in-process', 'ray', 'auto' or 'ray://host:port', "
                                 f"got {value!r}")
        elif key == "scheduler":
            if value not in SCHEDULERS:
                raise ValueError(f"tessera: option 'scheduler' must be one of {SCHEDULERS}, "
                                 f"got {value!r}")
        elif key == "trials":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"tessera: option 'trials' must be an int >= 0, got {value!r}")
        elif key == "dynamic_ranges":
            value = _parse_ranges(value)
        elif key == "layouts":
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"tessera: option 'layouts' must be None or a bool, "
                                 f"got {value!r}")
        elif not isinstance(value, bool):
            raise ValueError(f"tessera: option {key!r} must be a bool, got {value!r}")
        values[key] = value
    if "tune" in options and "tune_scope" not in options:
        values["tune_scope"] = "every"  # a user who asks for tuning gets every kernel tuned
    return Options(**values)
