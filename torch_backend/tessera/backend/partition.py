"""Partitioning an ATen FX graph into Tessera kernels.

Walks the graph in order and grows groups (one group = one fused kernel):
  * an anchor (matmul, conv) starts a new group: its operands are kernel inputs, never
    recomputed inside its reduction loop;
  * an elementwise op or a reduction joins the group of one of its producers (seen through
    view chains) when that creates no cycle between groups, otherwise it starts a new group;
  * views and sources never start groups: a group computes them inline when it needs them,
    and ATen computes them (free views) for everyone else;
  * unsupported ops run through ATen, logged once per operator.
"""

from __future__ import annotations

import logging
import operator
from typing import Any, Dict, List, Optional, Set, Tuple

import torch
import torch.fx as fx

from .attention import is_attention
from .log import log_once, logger
from .lowering import LOWERINGS, te_dtype
from .meta import TensorMeta, dense_permutation

MAX_GROUP_SIZE = 48  # members per fused kernel: keeps JIT time and register pressure sane

# Shape-only queries: their values are functions of the input shapes, which every compiled plan
# is specialised on.
_SIZE_QUERIES = {
    torch.ops.aten.sym_size.int, torch.ops.aten.sym_stride.int, torch.ops.aten.sym_numel.default,
    torch.ops.aten.sym_storage_offset.default,
}
# Operators whose size arguments a lowering never reads: it takes the output shape from the
# value's (symbolic) meta. In a plan for a range of sizes these may take size-dependent scalars.
_SIZES_FROM_META = {
    torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default,
    torch.ops.aten.reshape.default, torch.ops.aten.view_copy.default,
    torch.ops.aten.expand.default,
}
# Operators that run through ATen by design (mutations): never reported as missing.
_ATEN_BY_DESIGN = {torch.ops.aten.copy_.default}


def _flat_metas(m: Any):
    if isinstance(m, TensorMeta):
        yield m
    elif isinstance(m, (list, tuple)):
        for x in m:
            yield from _flat_metas(x)


def flat_nodes(a: Any):
    """The FX nodes in an argument (nested lists, tuples and dicts), in order."""
    if isinstance(a, fx.Node):
        yield a
    elif isinstance(a, (list, tuple)):
        for x in a:
            yield from flat_nodes(x)
    elif isinstance(a, dict):
        for x in a.values():
            yield from flat_nodes(x)


def input_nodes(node: fx.Node) -> List[fx.Node]:
    """Distinct FX nodes among a node's arguments, in order."""
    seen, out = set(), []
    for n in list(flat_nodes(node.args)) + list(flat_nodes(node.kwargs)):
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def touches_zero_size(node: fx.Node, metas: Dict[fx.Node, Any]) -> bool:
    """Does the node make a tensor with no elements, or read one (a key/value cache before its
    first entry)? Such nodes compute nothing: they run through ATen, which handles every
    zero-size corner case, and stay out of partitions so the work around them is still fused.
    Only tensors themselves count: an inference batch norm returns empty saved statistics next
    to its output, and getitem picks the output alone."""
    out = metas.get(node)
    if isinstance(out, TensorMeta) and out.numel == 0:
        return True
    if node.target is operator.getitem:
        return False
    return any(isinstance(metas.get(n), TensorMeta) and metas[n].numel == 0
               for n in input_nodes(node))


def foldable_scalars(graph: fx.Graph, metas: Dict[fx.Node, Any]) -> Set[fx.Node]:
    """Nodes with a non-tensor value that depends only on shapes (and int inputs): a plan
    specialised on those can use their recorded values as constants."""
    out: Set[fx.Node] = set()
    for n in graph.nodes:
        m = metas.get(n)
        if n.op == "output" or not isinstance(m, (int, float, bool)) or m is None:
            continue
        if n.op == "placeholder":
            out.add(n)
        elif n.op == "call_function":
            args = input_nodes(n)
            if n.target in _SIZE_QUERIES or (
                    not isinstance(n.target, torch._ops.OpOverload)
                    and all(a in out for a in args)):
                out.add(n)
    return out


class Classifier:
    """Kind of every node ('anchor', 'reduce', 'elementwise', 'view', 'source' or None = ATen),
    with the reason an operator is not supported logged once per operator."""

    def __init__(self, metas: Dict[fx.Node, Any], folded: Set[fx.Node], sym=None):
        self.metas = metas
        self.folded = folded
        self.sym = sym  # symbolic.SymbolicShapes of a plan for a range of sizes, or None
        self.kinds: Dict[fx.Node, Optional[str]] = {}
        self.reasons: Dict[fx.Node, str] = {}  # why a node runs through ATen (kind None)

    def kind(self, node: fx.Node) -> Optional[str]:
        if node not in self.kinds:
            kind, reason = self._classify(node)
            self.kinds[node] = kind
            if kind is None and reason:
                self.reasons[node] = reason
                name = _op_name(node.target)
                log_once(f"unsupported:{name}:{reason}",
                         f"tessera: {name} runs through ATen ({reason})")
        return self.kinds[node]

    def _classify(self, node: fx.Node) -> Tuple[Optional[str], Optional[str]]:
        if node.op != "call_function":
            return None, None
        m = self.metas.get(node)
        if not any(True for _ in _flat_metas(m)):
            return None, None  # scalar arithmetic on sizes, or no output
        if node.target in _ATEN_BY_DESIGN:
            return None, None
        if is_attention(node):  # ATen's or Tessera's attention kernel: attention.py decides
            return None, None
        if touches_zero_size(node, self.metas):
            return None, None
        low = LOWERINGS.get(node.target)
        if low is None:
            return None, "no Tessera lowering"
        if node.target is torch.ops.aten.clone.default and self._clone_is_a_view(node):
            return "view", None
        for a in input_nodes(node):
            am = self.metas.get(a)
            if not isinstance(am, TensorMeta) and not any(True for _ in _flat_metas(am)):
                if a in self.folded:
                    continue
                if self.sym is None or not self.sym.is_symbolic(a):
                    return None, "data-dependent scalar argument"
                if node.target not in _SIZES_FROM_META:
                    return None, "size-dependent scalar argument (dynamic shapes)"
        for t in list(_flat_metas(m)) + [x for a in input_nodes(node)
                                         for x in _flat_metas(self.metas.get(a))]:
            if t.device.type != "cpu":
                return None, f"device {t.device}"
            try:
                te_dtype(t.dtype)
            except KeyError:
                return None, f"dtype {t.dtype}"
        if low.check is not None:
            reason = low.check(node, self.metas)
            if reason:
                return None, reason
        return low.kind, None


    def _clone_is_a_view(self, node: fx.Node) -> bool:
        """In a functional graph a copy nobody can observe (not a graph output, not of a graph
        input that a copy_ might later overwrite) whose layout equals its input's is the value
        itself: the runner then makes it zero-copy (runner._clone_as_view) and partitions fuse
        straight through it. A clone that changes the layout stays a copy, which a kernel can
        fuse into its producer (writing the new layout directly)."""
        x = node.args[0]
        if x.op == "placeholder" or any(u.op == "output" for u in node.users):
            return False
        m, out = self.metas.get(x), self.metas.get(node)
        if not isinstance(m, TensorMeta) or not isinstance(out, TensorMeta):
            return False
        # The layout it was recorded with must be its input's: a clone to channels_last of a
        # contiguous value (interpolate's result, for one) is a copy whatever its input.
        same = all(a == b for d, a, b in zip(m.shape, m.stride, out.stride) if d > 1)
        return same and dense_permutation(m.shape, m.stride) is not None


def _op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"aten.{target.__name__}" if target.namespace == "aten" else str(target)
    return getattr(target, "__name__", str(target))


class Partitioner:
    def __init__(self, graph: fx.Graph, classifier: Classifier):
        self.graph = graph
        self.cls = classifier
        self.nodes = list(graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.group_of: Dict[fx.Node, int] = {}
        self.groups: List[List[fx.Node]] = []
        self.group_min: List[int] = []
        self.group_anchor: List[Optional[fx.Node]] = []

    # A view chain's root: the first node up the chain that is not a view.
    def root(self, n: fx.Node) -> fx.Node:
        while self.cls.kind(n) == "view":
            n = n.args[0]
        return n

    def _depends_on(self, starts: List[fx.Node], g: int) -> bool:
        """Does any start node depend on group g, treating every group as one unit?"""
        lo = self.group_min[g]
        stack, seen = list(starts), set()
        while stack:
            x = stack.pop()
            if x in seen or self.index[x] < lo:
                continue
            seen.add(x)
            h = self.group_of.get(x)
            if h == g:
                return True
            if h is not None:
                for member in self.groups[h]:
                    stack.extend(input_nodes(member))
            else:
                stack.extend(input_nodes(x))
        return False

    def _outside_inputs(self, nodes: List[fx.Node], groups: Set[int]) -> List[fx.Node]:
        """Inputs of `nodes` that `groups` do not compute themselves. Arguments reached through
        views of those groups are computed inside; sources read no data (full_like only looks
        at its argument's shape), so neither orders groups."""
        out = []
        for n in nodes:
            for a in input_nodes(n):
                r = self.root(a)
                if self.group_of.get(r) not in groups and self.cls.kind(r) != "source":
                    out.append(a)
        return out

    def _can_join(self, n: fx.Node, g: int) -> bool:
        if len(self.groups[g]) >= MAX_GROUP_SIZE:
            return False
        return not self._depends_on(self._outside_inputs([n], {g}), g)

    def _can_merge(self, a: int, b: int) -> bool:
        """Can groups a and b become one kernel? At most one anchor, whose operands stay kernel
        inputs, and no path between the two through other nodes."""
        if len(self.groups[a]) + len(self.groups[b]) > MAX_GROUP_SIZE:
            return False
        anchors = [x for x in (self.group_anchor[a], self.group_anchor[b]) if x is not None]
        if len(anchors) > 1:
            return False
        if anchors:
            other = b if self.group_anchor[a] is not None else a
            if any(self.group_of.get(self.root(x)) == other for x in input_nodes(anchors[0])):
                return False
        both = {a, b}
        return not (self._depends_on(self._outside_inputs(self.groups[a], both), b) or
                    self._depends_on(self._outside_inputs(self.groups[b], both), a))

    def _merge(self, a: int, b: int) -> None:
        """Moves group a into group b (a stays as an empty list so ids remain valid)."""
        for n in self.groups[a]:
            self.group_of[n] = b
        self.groups[b] = sorted(self.groups[a] + self.groups[b], key=self.index.get)
        self.groups[a] = []
        self.group_min[b] = min(self.group_min[a], self.group_min[b])
        self.group_anchor[b] = self.group_anchor[b] or self.group_anchor[a]

    def _new_group(self, n: fx.Node, anchor: bool) -> None:
        self.group_of[n] = len(self.groups)
        self.groups.append([n])
        self.group_min.append(self.index[n])
        self.group_anchor.append(n if anchor else None)

    def run(self) -> List[List[fx.Node]]:
        for n in self.nodes:
            kind = self.cls.kind(n)
            if kind in (None, "view", "source"):
                continue
            if kind == "anchor":
                self._new_group(n, anchor=True)
                continue
            cands = []
            for a in input_nodes(n):
                g = self.group_of.get(self.root(a))
                if g is not None and g not in cands:
                    cands.append(g)
            cands.sort(reverse=True)  # the most recent producer group first
            chosen = next((g for g in cands if self._can_join(n, g)), None)
            if chosen is None:
                self._new_group(n, anchor=False)
                continue
            # Producers in several groups (a sum of embeddings, a residual add): merge them
            # into one kernel where that is legal.
            for g in cands:
                if g != chosen and self._can_merge(g, chosen):
                    self._merge(g, chosen)
            if not self._can_join(n, chosen):
                self._new_group(n, anchor=False)
                continue
            self.group_of[n] = chosen
            self.groups[chosen].append(n)
        return [g for g in self.groups if g]


def partition(graph: fx.Graph, classifier: Classifier) -> List[List[fx.Node]]:
    groups = Partitioner(graph, classifier).run()
    if logger.isEnabledFor(logging.DEBUG):
        for i, g in enumerate(groups):
            logger.debug("tessera: group %d: %s", i, ", ".join(n.name for n in g))
    return groups

