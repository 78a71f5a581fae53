"""The torch.compile backend of Tessera.

    fast = torch.compile(model, backend="tessera", options={"verbose": True})

Pipeline: aot_autograd with core ATen decompositions -> each forward/backward graph is
specialised on its input shapes at first call -> partitions of supported operators become fused
Tessera kernels (matmul/conv partitions only when they measure faster than ATen), everything
else runs through ATen -> a generated runner executes the steps.
"""

from .entry import register, tessera_backend
from .graph import CompiledGraph, compiled_graphs, last_serial, recent_summaries
from .kernel_build import clear_cache
from .kernel_build import stats as kernel_stats
from .options import VALID_OPTIONS, Options, parse_options
from .plan import FALLBACK_CATEGORIES

__all__ = ["tessera_backend", "register", "CompiledGraph", "compiled_graphs", "last_serial",
           "recent_summaries", "Options",
           "parse_options", "VALID_OPTIONS", "kernel_stats", "clear_cache", "FALLBACK_CATEGORIES"]
