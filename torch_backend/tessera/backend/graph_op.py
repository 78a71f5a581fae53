"""A compiled graph as a torch.library custom operator: torch.ops.tessera.<name>.

    g = tessera.backend.compiled_graphs()[-1]
    outs = g.op(*graph_inputs)        # the graph's fresh tensor outputs (a tuple, or one)
    torch.export.export(module_calling_g_op, args)   # one node: tessera.<name>.default

The operator runs the compiled graph, keyed by the full input signature, so any shapes are safe.
Its CPU kernel is C++ (_C.GraphKernel): a signature whose runner is one AtenSequence call (no
Python step in between) runs without Python, prepacked weights included while they are unchanged
(_C.PackedWeight); any other call goes to CompiledGraph.run_checked. Its fake kernel runs the
graph's own ATen FX graph on the fake inputs, which gives exactly the metadata eager (and so the
Tessera runner) produces, with symbolic shapes too. That makes the graph opaque to an enclosing torch.compile or torch.export:
they see one node and trace no further.

Custom operators may not return aliases of their inputs or of each other, and a compiled graph
may (aot_autograd returns inputs saved for backward, views of inputs, several views of one
intermediate). The operator therefore returns only the "fresh" outputs:
  * an output that is a graph input itself is not returned by the op: GraphOp.call puts the
    caller's own tensor back in its place (no copy);
  * an output that is a view of an input, or a second view of a value another output already
    views, is cloned (in the real and in the fake kernel alike);
  * None and constant outputs are put back by GraphOp.call.
Graphs with symbolic-integer outputs (aot_autograd forward graphs traced with dynamic shapes
save sizes for backward) have no operator: `CompiledGraph.op` raises for them.

Inputs a graph mutates in place are declared mutable in the schema (Tensor(a!)).

The operator lives as long as its CompiledGraph (torch._dynamo.reset() and dropping the compiled
function free both): keep the graph (e.g. `g = ...; op = g.op`) while a module or an exported
program that calls the operator is in use.
"""

from __future__ import annotations

import operator
import threading
import weakref
from typing import Any, List, Tuple

import torch
import torch.fx as fx

from .. import _C

NAMESPACE = "tessera"
_lock = threading.Lock()


class GraphOpUnsupported(RuntimeError):
    """The graph cannot be expressed as a custom operator (see the module docstring)."""


def _arg_type(n: fx.Node) -> str:
    v = n.meta.get("val", n.meta.get("example_value"))
    if isinstance(v, torch.Tensor):
        return "Tensor"
    if isinstance(v, (torch.SymInt, int)) and not isinstance(v, bool):
        return "SymInt"
    if isinstance(v, (torch.SymFloat, float)):
        return "float"
    if isinstance(v, (torch.SymBool, bool)):
        return "bool"
    raise GraphOpUnsupported(f"input {n.name} has no recorded type (meta 'val' is {v!r})")


# Operators whose result shares memory with an argument although their schema does not say so.
_HIDDEN_VIEWS = {torch.ops.aten._unsafe_view.default}


def _alias_source(n: fx.Node):
    """The argument node whose memory n's value shares (views, in-place results), or None.
    aten.clone counts: the runner may make it the value itself (runner._clone_as_view) unless
    it is a graph output."""
    if n.op != "call_function":
        return None
    if n.target is operator.getitem:  # one tensor of a multi-output view (split, unbind)
        src = n.args[0]
        return _alias_source(src) if isinstance(src, fx.Node) else None
    first = n.args[0] if n.args and isinstance(n.args[0], fx.Node) else None
    if n.target is torch.ops.aten.clone.default:
        return None if any(u.op == "output" for u in n.users) else first
    if n.target in _HIDDEN_VIEWS:
        return first
    schema = getattr(n.target, "_schema", None)
    if schema is None or not schema.returns or schema.returns[0].alias_info is None:
        return None
    # A list of views (split: Tensor(a)[]) carries its alias set on the elements, not on the
    # list: any annotated argument is then the source.
    ret_set = schema.returns[0].alias_info.before_set
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and (not ret_set or a.alias_info.before_set & ret_set):
            v = n.args[i] if i < len(n.args) else n.kwargs.get(a.name)
            return v if isinstance(v, fx.Node) else None
    return None


def _alias_root(n: fx.Node) -> fx.Node:
    """The value whose memory n's value is part of (n itself when n owns its memory)."""
    seen = set()
    while n not in seen:
        seen.add(n)
        src = _alias_source(n)
        if src is None:
            break
        n = src
    return n


def _mutated_inputs(gm: fx.GraphModule, placeholders: List[fx.Node]) -> List[int]:
    """Positions of inputs some node writes to (an argument annotated Tensor(a!))."""
    index = {p: i for i, p in enumerate(placeholders)}
    out = set()
    for n in gm.graph.nodes:
        schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
        if schema is None or not schema.is_mutable:
            continue
        for i, a in enumerate(schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            v = n.args[i] if i < len(n.args) else n.kwargs.get(a.name)
            if isinstance(v, fx.Node) and _alias_root(v) in index:
                out.add(index[_alias_root(v)])
    return sorted(out)


class GraphOp:
    """The custom operator of one CompiledGraph and the map from its outputs to the graph's."""

    def __init__(self, graph):
        gm: fx.GraphModule = graph.gm
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        out_node = next(n for n in gm.graph.nodes if n.op == "output")
        outs = out_node.args[0]
        self.tuple_output = isinstance(outs, (tuple, list))
        outs = list(outs) if self.tuple_output else [outs]
        index = {p: i for i, p in enumerate(self.placeholders)}
        # Where each graph output comes from: ("input", i) | ("const", v) | ("op", j).
        self.sources: List[Tuple[str, Any]] = []
        self.op_nodes: List[fx.Node] = []     # graph values the op returns, in order
        self.clone: List[bool] = []           # per op output: copy it (it would alias)
        roots_taken = set()
        for o in outs:
            if not isinstance(o, fx.Node):
                if o is not None and not isinstance(o, (int, float, bool)):
                    raise GraphOpUnsupported(f"graph output {o!r} is not a tensor")
                self.sources.append(("const", o))
                continue
            if o in index:
                self.sources.append(("input", index[o]))
                continue
            v = o.meta.get("val")
            if not isinstance(v, torch.Tensor):
                raise GraphOpUnsupported(f"graph output {o.name} is a {type(v).__name__}, "
                                         "not a tensor")
            if o in self.op_nodes:
                self.sources.append(("op", self.op_nodes.index(o)))
                continue
            root = _alias_root(o)
            self.sources.append(("op", len(self.op_nodes)))
            self.op_nodes.append(o)
            self.clone.append(root in index or root in roots_taken)
            roots_taken.add(root)
        self.mutated = _mutated_inputs(gm, self.placeholders)
        self.name = f"graph_{graph.serial}_{graph.kind}"
        args = []
        for i, p in enumerate(self.placeholders):
            t = _arg_type(p)
            if t == "Tensor" and i in self.mutated:
                t = f"Tensor(a{i}!)"
            args.append(f"{t} in{i}")
        # A fixed tuple of tensors rather than Tensor[]: export functionalizes operators that
        # mutate inputs only when they return plain tensors, and the count is known anyway.
        n = len(self.op_nodes)
        returns = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
        self.schema = f"{self.name}({', '.join(args)}) -> {returns}"
        self._graph = weakref.ref(graph)
        self._gm = weakref.ref(gm)
        self._register()

    def _register(self) -> None:
        lib = torch.library.Library(NAMESPACE, "FRAGMENT")
        lib.define(self.schema)
        gm = self._gm()
        ref, gm_ref, clone, tuple_output = self._graph, self._gm, self.clone, self.tuple_output
        name = self.name
        # Position in the graph's outputs of each op output (its first occurrence).
        where = [next(i for i, s in enumerate(self.sources) if s == ("op", j))
                 for j in range(len(self.op_nodes))]

        single = len(where) == 1

        def pick(values):
            outs = values if tuple_output else (values,)
            picked = tuple(outs[i].clone() if c else outs[i] for i, c in zip(where, clone))
            return picked[0] if single else picked

        def real(*args):
            graph = ref()
            if graph is None:
                raise RuntimeError(f"{NAMESPACE}::{name}: its compiled graph was freed")
            return pick(graph.run_checked(list(args)))

        boxed = type(gm.graph._codegen).__name__ == "_BoxedCodeGen"  # forward(args_list)

        def fake(*args):
            gm = gm_ref()
            if gm is None:
                raise RuntimeError(f"{NAMESPACE}::{name}: its compiled graph was freed")
            return pick(gm(list(args)) if boxed else gm(*args))

        torch.library.register_fake(f"{NAMESPACE}::{self.name}", fake, lib=lib)
        self.lib = lib
        # The CPU kernel is C++: it runs the plans add_runner gives it without Python, and
        # calls `real` for any other input signature.
        self.kernel = _C.GraphKernel(f"{NAMESPACE}::{self.name}", len(self.placeholders),
                                     len(self.op_nodes), real)
        self.op = getattr(getattr(torch.ops, NAMESPACE), self.name).default

    def add_runner(self, signature: tuple, runner) -> bool:
        """Hands the C++ kernel the runner made for `signature` (graph._signature of the
        inputs) where the runner is one AtenSequence call (runner.WholeSequence); False where it
        is not, and calls with that signature keep going through Python."""
        whole = getattr(runner, "whole_sequence", None)
        if whole is None:
            return False
        index = {n: i for i, n in enumerate(whole.outputs)}
        if any(n not in index for n in self.op_nodes):
            return False
        sig = [torch.empty_strided(e[0], e[1], dtype=e[2], device="meta")
               if isinstance(e, tuple) else e for e in signature]
        self.kernel.add_plan(sig, whole.sequence, whole.inputs,
                             [index[n] for n in self.op_nodes], self.clone, whole.packed)
        return True

    def call(self, args: List[Any]) -> Any:
        """The graph's full outputs through the operator (inputs and constants put back)."""
        outs = self.op(*args)
        if len(self.op_nodes) == 1:
            outs = (outs,)
        full = []
        for kind, v in self.sources:
            if kind == "op":
                full.append(outs[v])
            elif kind == "input":
                full.append(args[v])
            else:
                full.append(v)
        return tuple(full) if self.tuple_output else full[0]

    def as_module(self) -> fx.GraphModule:
        """A GraphModule taking the graph's inputs whose forward is one call of the operator
        (plus the input/constant outputs put back): exportable with torch.export."""
        g = fx.Graph()
        ins = [g.placeholder(f"in{i}") for i in range(len(self.placeholders))]
        call = g.call_function(self.op, tuple(ins))
        full = []
        for kind, v in self.sources:
            if kind == "op":
                single = len(self.op_nodes) == 1
                full.append(call if single else g.call_function(operator.getitem, (call, v)))
            elif kind == "input":
                full.append(ins[v])
            else:
                full.append(v)
        g.output(tuple(full) if self.tuple_output else full[0])
        return fx.GraphModule(torch.nn.Module(), g, class_name=self.name)


def make_graph_op(graph) -> GraphOp:
    with _lock:
        return GraphOp(graph)


__all__ = ["GraphOp", "GraphOpUnsupported", "make_graph_op", "NAMESPACE"]
