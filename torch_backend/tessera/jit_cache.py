"""Bounded caches for compiled code: a long-running process that sees many input shapes must not
grow without limit.

`LruCache` maps keys to compiled objects and forgets the least recently used once the entries'
costs add up past its budget. Forgetting only drops the cache's own reference: a kernel that a
runner, a program or a running call still holds stays alive (and its code mapped) until the last
of them lets go, so eviction never frees code that is in use. A forgotten kernel that is asked for
again is compiled again.

The backend's kernel cache (backend/kernel_build.py) is bounded by the bytes of machine code its kernels hold in the
JIT: `tessera.set_jit_cache_limit(bytes)`, or `TESSERA_JIT_CACHE_MB` in the environment (default
JIT_CACHE_DEFAULT_MB). The per-shape runners of a compiled graph and the per-shape kernels of a
`tessera.op` are bounded by count (SHAPES_PER_GRAPH).
"""

from __future__ import annotations

import collections
import os
import threading
from typing import Any, Callable, Hashable, Optional

JIT_CACHE_DEFAULT_MB = 512   # machine code kept for reuse; a kernel is typically 5-50 KB
SHAPES_PER_GRAPH = 64        # input signatures one compiled graph or tessera.op keeps compiled


class LruCache:
    """Thread-safe LRU map whose entries cost `cost(value)`; their total stays <= budget (one
    entry larger than the whole budget is still kept, alone, until the next insertion)."""

    def __init__(self, budget: int, cost: Callable[[Any], int] = lambda value: 1):
        self._budget = int(budget)
        self._cost = cost
        self._items: "collections.OrderedDict[Hashable, tuple]" = collections.OrderedDict()
        self._total = 0
        self._lock = threading.Lock()
        self.evictions = 0

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return default
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any) -> None:
        cost = max(0, int(self._cost(value)))
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._items[key] = (value, cost)
            self._total += cost
            self._shrink()

    def items(self) -> list:
        """A snapshot of the (key, value) entries, least recently used first."""
        with self._lock:
            return [(k, v[0]) for k, v in self._items.items()]

    def set_budget(self, budget: int) -> None:
        with self._lock:
            self._budget = int(budget)
            self._shrink()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._total = 0

    @property
    def budget(self) -> int:
        return self._budget

    @property
    def total(self) -> int:
        """Sum of the costs of the entries kept."""
        return self._total

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def values(self) -> list:
        with self._lock:
            return [v for v, _ in self._items.values()]

    def _shrink(self) -> None:
        while self._total > self._budget and len(self._items) > 1:
            _, (_, cost) = self._items.popitem(last=False)
            self._total -= cost
            self.evictions += 1


def default_jit_cache_bytes(environ: Optional[dict] = None) -> int:
    """The kernel cache's budget: TESSERA_JIT_CACHE_MB (a positive number of MiB) or the
    default. A malformed value is an error, not silently the default."""
    env = os.environ if environ is None else environ
    text = env.get("TESSERA_JIT_CACHE_MB")
    if text is None or text == "":
        return JIT_CACHE_DEFAULT_MB << 20
    try:
        mb = float(text)
    except ValueError:
        raise ValueError(f"TESSERA_JIT_CACHE_MB must be a number of MiB, got {text!r}") from None
    if not mb > 0:
        raise ValueError(f"TESSERA_JIT_CACHE_MB must be positive, got {text!r}")
    return int(mb * (1 << 20))
