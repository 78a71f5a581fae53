"""Folding what a graph computes from no input: computed once, when the graph is compiled.

Models build position indices, masks and lookup tables from arange, zeros and constants on every
call. Eager often caches them (BEiT's relative position index sits behind an lru_cache), but
Dynamo traces through the cache, so the ATen graph rebuilds them on every call: in BEiT a dozen
operators per layer, 3.7 ms of a 27 ms compiled model. Such values read no placeholder, so they
are the same on every call: each is computed here once, with ATen, and becomes a get_attr
constant of the graph module, which the planner and the eager runner both read as it is.

What is folded: a value computed only from get_attr constants and operators that read nothing
(a constant subgraph), at the subgraph's boundary (a value something outside it reads), when
some operator of the subgraph does real work (a bare arange or view is recomputed inside the
kernels that read it at no cost), and when it holds at most MAX_FOLDED_BYTES. Operators with
side effects or random results never count as constant.

Inference graphs also fold values computed from weights (the module's parameters and buffers,
as Inductor's freezing does): BEiT interpolates and gathers its relative position bias table,
a parameter, in every layer on every call. Such a value is a
DerivedConstant: it is computed again, in place, before a call whose weights are other tensors
or were changed in place (their version counters moved), so it never goes stale.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Dict, List, Optional, Set

import torch
import torch.fx as fx

from .lowering import LOWERINGS
from .plan import get_attr_value

MAX_FOLDED_BYTES = 16 << 20  # the largest value kept as a constant (a folded value's bytes)

_EMPTY = {torch.ops.aten.empty.memory_format, torch.ops.aten.empty_like.default,
          torch.ops.aten.empty_strided.default, torch.ops.aten.empty_permuted.default}


def _pure(n: fx.Node) -> bool:
    """Does n compute a value from its arguments alone, the same on every call?"""
    if n.op != "call_function":
        return False
    if n.target is operator.getitem:
        return True
    if not isinstance(n.target, torch._ops.OpOverload) or n.target in _EMPTY:
        return False
    schema = n.target._schema
    if schema.is_mutable or torch.Tag.nondeterministic_seeded in n.target.tags:
        return False
    return True


def _cheap(n: fx.Node) -> bool:
    """Views, getitem and operators that read no data: recomputing them costs nothing."""
    low = LOWERINGS.get(n.target)
    return n.target is operator.getitem or (low is not None and low.kind in ("view", "source"))


def _constant_nodes(graph: fx.Graph, weights: Dict[fx.Node, Any]) -> Set[fx.Node]:
    constant: Set[fx.Node] = set(weights)
    for n in graph.nodes:
        if n.op == "get_attr" or (_pure(n) and all(a in constant for a in n.all_input_nodes)):
            constant.add(n)
    return constant


@dataclasses.dataclass
class DerivedConstant:
    """A folded value computed from weights: `compute` (a GraphModule) maps the weights at
    `sources` (positions among the graph's inputs) to it, and `refresh` computes it again, into
    the graph module's buffer, when those weights are not the ones it was computed from."""
    buffer: torch.Tensor
    compute: fx.GraphModule
    sources: List[int]
    seen: List[tuple]  # (data pointer, version) of each source when `buffer` was computed

    def refresh(self, args: List[Any]) -> None:
        now = [_identity(args[i]) for i in self.sources]
        if now != self.seen:
            with torch.no_grad():
                self.buffer.copy_(self.compute(*[args[i] for i in self.sources]))
            self.seen = now


def _identity(t: torch.Tensor) -> tuple:
    return t.data_ptr(), t._version


@dataclasses.dataclass
class Folding:
    """What fold_constants did: how many values it folded, and those computed from weights."""
    count: int = 0
    derived: List[DerivedConstant] = dataclasses.field(default_factory=list)
    attrs: List[fx.Node] = dataclasses.field(default_factory=list)  # the get_attr nodes made

    def refresh(self, args: List[Any]) -> None:
        """Brings every value computed from weights up to date with the weights in args."""
        for d in self.derived:
            d.refresh(args)


def _does_work(n: fx.Node, constant: Set[fx.Node], seen: Set[fx.Node]) -> bool:
    """Is some operator computing n (n included) more than a view or a source?"""
    if n in seen or n.op != "call_function":
        return False
    seen.add(n)
    if not _cheap(n):
        return True
    return any(_does_work(a, constant, seen) for a in n.all_input_nodes if a in constant)


def fold_constants(gm: fx.GraphModule, weights: Optional[Dict[fx.Node, torch.Tensor]] = None
                   ) -> Folding:
    """Replaces the constant values of gm (see the module docstring) by get_attr constants, in
    place. weights: the placeholders holding weights, with their tensors on this call (values
    computed from them are folded too, as DerivedConstants). Everything that can fail is
    computed before the graph changes."""
    weights = weights or {}
    graph = gm.graph
    constant = _constant_nodes(graph, weights)
    boundary = [n for n in graph.nodes if n in constant and n.op == "call_function"
                and any(u not in constant for u in n.users)]
    boundary = [n for n in boundary if _does_work(n, constant, set())]
    out = Folding()
    if not boundary:
        return out
    values = _evaluate(gm, constant, boundary, weights)
    positions = {n: i for i, n in enumerate(n for n in graph.nodes if n.op == "placeholder")}
    boundary = [n for n in boundary if isinstance(values.get(n), torch.Tensor)
                and values[n].numel() * values[n].element_size() <= MAX_FOLDED_BYTES]
    # A folded value is refreshed in place: it must not share memory with a weight.
    storages = {w.untyped_storage().data_ptr() for w in weights.values()}
    for n in boundary:
        if values[n].untyped_storage().data_ptr() in storages:
            values[n] = values[n].clone()
    # Each from the graph as it came: a folded value computed from another folded value keeps
    # the whole computation back to the weights (what it must follow), not a stale copy.
    derived = {n: _derived(gm, n, constant, weights, positions, values[n]) for n in boundary}
    for n in boundary:
        name = f"_tessera_folded_{out.count}"
        while hasattr(gm, name):
            name += "_"
        gm.register_buffer(name, values[n], persistent=False)
        with graph.inserting_before(n):
            attr = graph.get_attr(name)
        attr.meta.update(n.meta)
        n.replace_all_uses_with(attr)
        out.count += 1
        out.attrs.append(attr)
        if derived[n] is not None:
            out.derived.append(derived[n])
    if out.count:
        graph.eliminate_dead_code()
        gm.recompile()
    return out


def _derived(gm: fx.GraphModule, n: fx.Node, constant: Set[fx.Node],
             weights: Dict[fx.Node, torch.Tensor], positions: Dict[fx.Node, int],
             value: torch.Tensor) -> Optional[DerivedConstant]:
    """n's DerivedConstant (None where n reads no weight): a GraphModule computing n from the
    weights among its ancestors, which are its inputs."""
    needed: Set[fx.Node] = set()
    stack = [n]
    while stack:
        m = stack.pop()
        if m not in needed:
            needed.add(m)
            stack.extend(a for a in m.all_input_nodes if a in constant)
    sources = [m for m in gm.graph.nodes if m in needed and m in weights]
    if not sources:
        return None
    sub = fx.Graph()
    env = {m: sub.placeholder(m.name) for m in sources}
    for m in gm.graph.nodes:
        if m in needed and m not in env:
            env[m] = sub.node_copy(m, lambda a: env[a])
    sub.output(env[n])
    return DerivedConstant(value, fx.GraphModule(gm, sub), [positions[m] for m in sources],
                           [_identity(weights[m]) for m in sources])


def _evaluate(gm: fx.GraphModule, constant: Set[fx.Node], wanted: List[fx.Node],
              weights: Dict[fx.Node, torch.Tensor]) -> Dict[fx.Node, Any]:
    """The values of the constant nodes up to the last of `wanted`, computed by ATen."""
    env: Dict[fx.Node, Any] = dict(weights)
    last = wanted[-1]
    with torch.no_grad():
        for n in gm.graph.nodes:
            if n in constant and n not in env:
                if n.op == "get_attr":
                    env[n] = get_attr_value(gm, n.target)
                else:
                    args, kwargs = fx.node.map_arg((n.args, n.kwargs), lambda a: env[a])
                    env[n] = n.target(*args, **kwargs)
            if n is last:
                break
    return env

