"""Search mode over a whole graph (mode="max-autotune" / options={"tune": "search"}).

Before any partition is planned, every partition's fused kernel is lowered to a KernelSpec and
the distinct ones (weighted by how often each occurs in the graph) are tuned together by the task
scheduler (kernel_build.search_specs -> _C.tune_tasks): measurement rounds go where the graph's
latency drops most instead of a fixed budget per kernel. Planning then builds each kernel with
its searched schedule and still chooses between it, ATen and the split variant by measurement.
"""

from __future__ import annotations

import logging
from typing import Dict, List

from . import keys
from .kernel_build import search_specs
from .log import log_once, logger


def tune_graph(planner, groups: List[list]) -> None:
    """Searches the fused kernels of `groups` (the planner's partitions) together."""
    weighted: Dict[tuple, list] = {}
    for members in groups:
        try:
            spec = planner._spec_for(members)
        except Exception:  # noqa: BLE001 - planning reports it, with the partition's names
            continue
        # By the workload's identity (the key object itself compares by address).
        entry = weighted.setdefault(keys.cache_key(spec.workload()), [spec, 0])
        entry[1] += 1
    try:
        result = search_specs([tuple(v) for v in weighted.values()], planner.options)
    except Exception as e:  # noqa: BLE001 - a failed search costs the tuning, not the graph
        log_once(f"graph-search:{type(e).__name__}:{e}",
                 f"tessera: searching the graph's kernels together failed ({type(e).__name__}: "
                 f"{e}); each kernel is tuned on its own", level=logging.WARNING)
        return
    if result is not None and planner.options.verbose:
        searched = [t for t in result["tasks"] if t["status"] == "search"]
        logger.info("tessera: searched %d kernels together in %.1f s (%d rounds of %d trials, "
                    "scheduler %s)", len(searched), result["tune_s"], len(result["order"]),
                    result["round_trials"], planner.options.scheduler)
