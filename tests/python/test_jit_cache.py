"""The bounded caches of compiled code (tessera/jit_cache.py): LRU order, byte budgets, the
environment setting, and what the backend's kernel cache reports."""

import pytest
import torch

import tessera
from tessera.jit_cache import JIT_CACHE_DEFAULT_MB, LruCache, default_jit_cache_bytes


def test_least_recently_used_entries_go_first():
    c = LruCache(3)
    for k in "abc":
        c.put(k, k.upper())
    assert c.get("a") == "A"  # a is now the most recent
    c.put("d", "D")
    assert "b" not in c and all(k in c for k in "acd")
    assert len(c) == 3 and c.total == 3 and c.evictions == 1


def test_costs_add_up_to_the_budget():
    c = LruCache(100, cost=len)
    c.put("x", "x" * 60)
    c.put("y", "y" * 30)
    assert c.total == 90
    c.put("z", "z" * 20)  # 110 > 100: x (least recent) goes
    assert "x" not in c and c.total == 50
    c.put("y", "y" * 5)   # replacing an entry replaces its cost
    assert c.total == 25
    c.set_budget(10)      # shrinking evicts down to the new budget, keeping the newest
    assert list(c.values()) == ["y" * 5] and c.total == 5


def test_one_entry_larger_than_the_budget_is_kept_alone():
    c = LruCache(10, cost=len)
    c.put("small", "ab")
    c.put("big", "b" * 50)
    assert "big" in c and "small" not in c and c.total == 50


def test_environment_setting():
    assert default_jit_cache_bytes({}) == JIT_CACHE_DEFAULT_MB << 20
    assert default_jit_cache_bytes({"TESSERA_JIT_CACHE_MB": "1.5"}) == 3 << 19
    for bad in ("lots", "0", "-3"):
        with pytest.raises(ValueError, match="TESSERA_JIT_CACHE_MB"):
            default_jit_cache_bytes({"TESSERA_JIT_CACHE_MB": bad})


def test_backend_kernel_cache_reports_and_bounds_code_bytes():
    info = tessera.jit_cache_info()
    assert info["limit_bytes"] > 0 and info["code_bytes"] >= 0
    with pytest.raises(ValueError, match="positive"):
        tessera.set_jit_cache_limit(0)
    torch._dynamo.reset()
    f = torch.compile(lambda x: torch.tanh(x) * 3 + 1, backend="tessera",
                      options={"anchor_measure": False})
    x = torch.randn(17, 5)
    assert torch.allclose(f(x), torch.tanh(x) * 3 + 1, atol=1e-6)
    now = tessera.jit_cache_info()
    assert now["kernels"] >= 1 and now["code_bytes"] > 0
