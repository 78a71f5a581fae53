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

A partition reading weights (constant inputs) keeps the rules' kernel instead: that kernel reads
them packed once (prepack), while DietCode's micro-kernels pack their operands on every call;
on BERT under dynamic=True (benchmarks/dynamic.py --case bert) the prepacked rules' kernels
measured faster than the DietCode ones, which then lost their partitions to ATen.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

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
    output_shapes(sizes), no prepacked inputs (micro-kernels read weights as they are)."""

    def __init__(self, dynamic, rules):
        self.dynamic = dynamic
        self.rules = rules
        self.run = dynamic.run
        self.size_names = rules.size_names
        self.output_shapes = rules.output_shapes
        self.prepacks = []
        self.report = rules.report

    @property
    def code_bytes(self) -> int:  # the micro-kernels are not counted: about as many as this
        return self.rules.code_bytes * (1 + self.dynamic.num_kernels)

    @property
    def jit_ms(self) -> float:
        return self.rules.jit_ms

    @property
    def lower_ms(self) -> float:
        return self.rules.lower_ms


def dietcode_applies(spec: Any, mode: str) -> bool:
    """Is this spec's kernel tuned by DietCode? A symbolic anchor partition, under a tuning
    mode, reading no weight it could keep packed."""
    return spec.symbolic and spec.anchor and mode in DIETCODE_MODES and not spec.constant_inputs


def _largest_instance(size_ranges, names) -> int:
    his = {name: hi for name, _, hi in size_ranges}
    product = 1
    for n in names:
        product *= his[n]
    return product


def compile_dietcode(spec: Any, records: Optional[Any]) -> Any:
    """The kernel of a symbolic anchor spec: DietCode's selection over the size ranges, or the
    rules' kernel alone where the ranges are too wide to tune on or DietCode tuning fails
    (logged)."""
    return compile_dynamic(spec.name, spec.te_outputs, spec.te_inputs, spec.size_ranges, records,
                           hint="options['dynamic_ranges']")


def compile_dynamic(name: str, te_outputs, te_inputs, size_ranges, records: Optional[Any],
                    hint: str) -> Any:
    """DietCode's kernel for the DAG te_outputs <- te_inputs over its size variables' ranges
    (size_ranges: (name, lo, hi) of each), or the rules' kernel over the same DAG where the
    ranges are too wide to tune on or tuning fails (logged): either serves every size without
    compiling per size. `records`: an opened records database (its .db) or None. `hint` says in
    a message where narrower ranges are declared."""
    request = _C.CompileRequest(name=name, tune="default")
    rules = _C.compile(te_outputs, te_inputs, request)
    if _largest_instance(size_ranges, rules.size_names) > DIETCODE_MAX_SIZE_PRODUCT:
        log_once(f"dietcode-wide:{name}", f"tessera: {name}: size ranges too wide for "
                 f"DietCode ({size_ranges}); the rules' schedule serves every size "
                 f"(declare narrower ones: {hint})", level=logging.INFO)
        return rules
    try:
        dynamic = _C.dynamic.tune(te_outputs, te_inputs, name=name,
                                  records=records.db if records is not None else None)
    except Exception as e:
        log_once(f"dietcode-failed:{name}:{type(e).__name__}",
                 f"tessera: {name}: DietCode tuning failed, the rules' schedule serves "
                 f"every size ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
                 level=logging.WARNING)
        return rules
    return DietCodeKernel(dynamic, rules)
