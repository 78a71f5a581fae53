"""One way to name a workload: a structural hash confirmed by a canonical text.

A kernel's key is the C++ workload key of its tensor-expression DAG (csrc/db/workload_key.h:
structural hash, dtypes and shapes, target, canonical text with the kernel's argument order).
Every other key derives from one:

  kernel cache    (workload key, tuning mode): kernels of identical partitions, in one model or
                  across models, are compiled once per process
  decisions       a partition's measured choice (anchor.py): the fused kernel's workload plus what
                  else the choice depends on (candidates, tuning mode, threads, version)
  graph checks    a whole graph against eager (graph_guard.py): the graph's canonical text (its
                  FX code and input signature) plus the same context

Derived keys are WorkloadKeys too (hash of the canonical text), so the records database files
all of them the same way.
"""

from __future__ import annotations

import hashlib
from typing import Any, List, Tuple

import torch

from .. import _C

_DERIVED_FORMAT = "tessera derived key v2"


def kernel_key(te_outputs: List[Any], te_inputs: List[Any]) -> "_C.WorkloadKey":
    """The workload key of the kernel computing te_outputs from te_inputs (in ABI order)."""
    return _C.workload_key(te_outputs, te_inputs)


def cache_key(key: "_C.WorkloadKey", *extra: Any) -> Tuple:
    """A hashable in-process key: the workload's identity (all four fields) plus `extra`."""
    return (key.hash, key.shapes, key.target, key.canonical) + extra


# How choices are timed and what was timed; part of every decision's context, so that a change
# makes earlier processes' decisions (in the records database) stale instead of binding. 2: ATen
# candidates stopped leaking their outputs during timing and freed memory stays in the process
# (allocator.py); before, ATen's times were inflated by page faults. 3: kernels with much work
# but little data run in parallel (TuningPolicy::serial_points); before, the fused matmuls of
# small layers ran on one thread and lost to ATen.
MEASUREMENT_METHOD = 3


def context(options: Any, candidates, prepacked: bool = False) -> str:
    """What a measured choice depends on besides the workload and the machine: the candidates
    built, how the fused kernel was tuned, both thread counts and the Tessera version (a newer
    compiler may build faster kernels), and whether the fused kernel reads weights prepacked
    (then it packs nothing per call)."""
    tune = getattr(options, "tune", None) or "construct"
    lines = [f"version={_C.version()}", f"measured={MEASUREMENT_METHOD}", f"tune={tune}",
             f"threads={torch.get_num_threads()},{_C.get_num_threads()}",
             f"candidates={','.join(sorted(candidates))}"]
    if prepacked:
        lines.append("prepacked=1")
    return "\n".join(lines)


def derived_key(kind: str, canonical: str, ctx: str) -> "_C.WorkloadKey":
    """A key for something measured about a workload (`canonical`: its canonical text) under
    `ctx`: kind is the shapes field, so decisions never meet schedules in the database."""
    text = f"{_DERIVED_FORMAT}\n{kind}\n{ctx}\n{canonical}"
    digest = hashlib.sha256(text.encode()).digest()
    return _C.WorkloadKey(int.from_bytes(digest[:8], "big"), kind, _C.host_target(), text)


def decision_key(kernel: "_C.WorkloadKey", ctx: str) -> "_C.WorkloadKey":
    """The key of a partition's measured choice (its fused kernel's workload under ctx)."""
    return derived_key("partition-decision", f"{kernel.shapes}\n{kernel.canonical}", ctx)


def graph_key(code: str, signature: tuple, kernels: int, ctx: str) -> "_C.WorkloadKey":
    """The key of a whole graph's check against eager."""
    return derived_key("graph-check", f"kernels={kernels} args={signature!r}\n{code}", ctx)


__all__ = ["kernel_key", "cache_key", "context", "derived_key", "decision_key", "graph_key"]
