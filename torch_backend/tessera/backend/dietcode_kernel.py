"""DietCode kernels for the partitions of a plan made for a range of sizes.

A kernel whose schedule needs concrete sizes (the tiling of a matmul) cannot be tuned for one
size and serve them all. For a size-generic anchor partition (matmul/conv and its fused
epilogue) under a tuning mode, DietCode (csrc/tune/dynamic, tessera._C.dynamic.tune) selects a
few micro-kernels over the size variables' ranges, compiles each once and dispatches per call;
its selection is kept in the records database, so a second process does not tune again. The
rules' kernel of the same DAG, compiled alongside, gives the size order and output shapes (and
is what runs if DietCode tuning fails).

compile_dynamic is the same for any DAG over size variables with ranges: tessera.op's dynamic=
sizes (dynamic_op.py) use it too.

Weights (constant inputs) are packed once, not per call: every micro-kernel reads the weights
it packs from one packed argument per weight (its segments hold each micro-kernel's layout),
made by the kernel's prepack and kept by the caller's PackedInput like any prepacked weight.
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Sequence

from .. import _C
from .log import log_once

# Tuning modes under which anchor partitions of range plans are tuned by DietCode.
DIETCODE_MODES = ("construct", "search")
# DietCode measures its candidates on the largest instance of the ranges: it tunes a kernel only
# where the product of its size variables' upper bounds is at most this (e.g. 4 x 16384 rows).
DIETCODE_MAX_SIZE_PRODUCT = 1 << 16


class DietCodeKernel:
    """A DynamicKernel with the interface KernelCall and the kernel cache use: run(ptrs,
    sizes) with the sizes in collect_dag order (the rules' kernel's size_names, the same order),
    output_shapes(sizes), prepacks and prepack(input, src, dst) for the weights it reads
    packed."""

    def __init__(self, dynamic, rules):
        self.dynamic = dynamic
        self.rules = rules
        self.run = dynamic.run
        self.size_names = rules.size_names
        self.output_shapes = rules.output_shapes
        self.prepacks = dynamic.prepacks
        self.prepack = dynamic.prepack
        self.report = DietCodeReport(rules.report, dynamic.num_kernels)

    def runner(self):
        """The dynamic kernel's run with the rules' kernel's output shapes (_C.KernelCall)."""
        return self.dynamic.runner(self.rules.runner())

    @property
    def code_bytes(self) -> int:  # the micro-kernels are not counted: about as many as this
        return self.rules.code_bytes * (1 + self.dynamic.num_kernels)

    @property
    def jit_ms(self) -> float:
        return self.rules.jit_ms

    @property
    def lower_ms(self) -> float:
        return self.rules.lower_ms


class DietCodeReport:
    """The rules' kernel's compile report, as the dynamic kernel's: its schedules come from
    DietCode (what tessera.explain shows), the rest is the rules' kernel's."""

    def __init__(self, rules_report, kernels: int):
        self._rules = rules_report
        self.source = "dietcode"
        self.note = f"{kernels} micro-kernels and a dispatcher over the size ranges"

    def __getattr__(self, name: str):
        return getattr(self._rules, name)


def dietcode_applies(spec: Any, mode: str) -> bool:
    """Is this spec's kernel tuned by DietCode? A symbolic anchor partition, under a tuning
    mode."""
    return spec.symbolic and spec.anchor and mode in DIETCODE_MODES


def _largest_instance(size_ranges, names) -> int:
    his = {name: hi for name, _, hi in size_ranges}
    product = 1
    for n in names:
        product *= his[n]
    return product


def compile_dietcode(spec: Any, records: Optional[Any], mode: str = "construct",
                     trials: int = 0) -> Any:
    """The kernel of a symbolic anchor spec: DietCode's selection over the size ranges, or the
    rules' kernel alone where the ranges are too wide to tune on or DietCode tuning fails
    (logged). Under search mode, search (`trials` measurements; 0: the tuning policy's) tunes
    the largest instance and its choice joins DietCode's candidates."""
    search_trials = (trials or _C.tuning_policy().search_trials) if mode == "search" else 0
    return compile_dynamic(spec.name, spec.te_outputs, spec.te_inputs, spec.size_ranges, records,
                           hint="options['dynamic_ranges']",
                           constant_inputs=list(spec.constant_inputs),
                           search_trials=search_trials)


def compile_dynamic(name: str, te_outputs, te_inputs, size_ranges, records: Optional[Any],
                    hint: str, constant_inputs: Sequence[int] = (), search_trials: int = 0) -> Any:
    """DietCode's kernel for the DAG te_outputs <- te_inputs over its size variables' ranges
    (size_ranges: (name, lo, hi) of each), or the rules' kernel over the same DAG where the
    ranges are too wide to tune on or tuning fails (logged): either serves every size without
    compiling per size. `records`: an opened records database (its .db) or None. `hint` says in
    a message where narrower ranges are declared. `constant_inputs`: positions of weights, which
    either kernel reads packed once (its prepacks). `search_trials`: search mode's measurements
    on the largest instance (0: no search)."""
    request = _C.CompileRequest(name=name, tune="default")
    request.constant_inputs = list(constant_inputs)
    rules = _C.compile(te_outputs, te_inputs, request)
    if _largest_instance(size_ranges, rules.size_names) > DIETCODE_MAX_SIZE_PRODUCT:
        log_once(f"dietcode-wide:{name}", f"tessera: {name}: size ranges too wide for "
                 f"DietCode ({size_ranges}); the rules' schedule serves every size "
                 f"(declare narrower ones: {hint})", level=logging.INFO)
        return rules
    try:
        dynamic = _C.dynamic.tune(te_outputs, te_inputs, name=name,
                                  records=records.db if records is not None else None,
                                  constant_inputs=list(constant_inputs),
                                  search_trials=search_trials)
    except Exception as e:
        log_once(f"dietcode-failed:{name}:{type(e).__name__}",
                 f"tessera: {name}: DietCode tuning failed, the rules' schedule serves "
                 f"every size ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
                 level=logging.WARNING)
        return rules
    return DietCodeKernel(dynamic, rules)
