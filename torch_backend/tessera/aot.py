"""Ahead-of-time compilation: `tessera.export(model, args)` returns a model that runs without
Dynamo.

torch.compile evaluates every call's frame and checks its guards before any backend code runs:
about 11-16 us a call on this project's CI machines with a backend that does nothing, more
than a graph of a few small operators takes eagerly. For such graphs, and for deployment where
the shapes are known, `export` compiles torch.export's graph of the model once (core ATen with
Tessera's decompositions; parameters, buffers and constants lifted to inputs) and returns an
`ExportedModel` whose calls check the inputs against what was exported and run the compiled
graph's runner directly, as AOTInductor does for Inductor.

Semantics (each one checked, with a clear error where a call does not meet it):
  * inference only: the exported model does not record autograd, so a call whose inputs
    require grad while grad mode is on is refused (wrap it in torch.no_grad());
  * shapes are those of the example inputs, except dimensions exported as dynamic
    (`dynamic_shapes`, as torch.export takes it), which may take any size in their range;
    dtypes and devices are those of the examples; strides may differ (a runner is then
    specialised for them);
  * parameters and buffers are the model's own tensors, read on every call: a change made in
    place is seen (kernels that keep packed copies repack them, guarded by version counters);
    assigning a new tensor to a module attribute is not (export again);
  * models that mutate their buffers or inputs (training-mode batch norm) are refused at export.

Before compiling, the graph drops what torch.export adds for its own runtime and Tessera's
checks already cover: dtype/device assertions on intermediates, and clones of lifted tensors
that nothing writes to (_drop_assertions_and_input_clones).
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from .backend.decompositions import decomposition_table
from .backend.graph import CompiledGraph
from .backend.options import parse_options


class ExportError(RuntimeError):
    """A model or a call that tessera.export does not support, with the reason."""


class _Module(torch.nn.Module):
    """A plain function as the module torch.export takes."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class _InputCheck:
    """What one user input must be: dtype, device, and per dimension its exported size or, for a
    dynamic dimension, the range of sizes torch.export allows it."""

    def __init__(self, index: int, val: torch.Tensor, ranges: Dict[Any, Any]):
        self.index = index
        self.dtype = val.dtype
        self.device = val.device
        self.dims = []  # int, or (lo, hi) with hi None for unbounded
        for d in val.shape:
            if isinstance(d, torch.SymInt):
                r = ranges.get(d.node.expr)
                lo = int(r.lower) if r is not None else 0
                hi = int(r.upper) if r is not None and r.upper.is_finite else None
                self.dims.append((lo, hi))
            else:
                self.dims.append(int(d))
        self.static_shape = torch.Size(self.dims) if all(isinstance(d, int) for d in self.dims) \
            else None

    def check(self, a: Any) -> None:
        if not isinstance(a, torch.Tensor):
            raise ExportError(f"tessera.export: input {self.index} must be a tensor, got "
                              f"{type(a).__name__}")
        if a.dtype != self.dtype or a.device != self.device:
            raise ExportError(f"tessera.export: input {self.index} was exported as {self.dtype} "
                              f"on {self.device}, got {a.dtype} on {a.device}")
        if self.static_shape is not None:
            if a.shape != self.static_shape:
                raise ExportError(f"tessera.export: input {self.index} was exported with shape "
                                  f"{tuple(self.static_shape)}, got {tuple(a.shape)} (export with "
                                  f"dynamic_shapes for sizes that vary)")
            return
        if a.dim() != len(self.dims) or not all(self._fits(d, n) for d, n in zip(self.dims,
                                                                                  a.shape)):
            raise ExportError(f"tessera.export: input {self.index} has shape {tuple(a.shape)}, "
                              f"outside the exported {self._describe()}")

    @staticmethod
    def _fits(dim, n: int) -> bool:
        if isinstance(dim, int):
            return n == dim
        lo, hi = dim
        return n >= lo and (hi is None or n <= hi)

    def _describe(self) -> str:
        return "(" + ", ".join(str(d) if isinstance(d, int) else
                               f"{d[0]}..{'' if d[1] is None else d[1]}" for d in self.dims) + ")"


class ExportedModel:
    """A model compiled ahead of time by `tessera.export`; call it as the model."""

    def __init__(self, program: torch.export.ExportedProgram, graph: CompiledGraph,
                 lifted: List[torch.Tensor], checks: List[_InputCheck]):
        self.program = program  # torch.export's program, as compiled
        self.compiled_graph = graph
        self._lifted = lifted  # parameters, buffers and constants, in placeholder order
        self._checks = checks
        self._in_spec = program.call_spec.in_spec
        self._out_spec = program.call_spec.out_spec
        # Calls with only positional tensors, as exported, skip pytree flattening.
        self._positional = self._in_spec == pytree.tree_flatten(
            (tuple(None for _ in checks), {}))[1]
        # A static graph's runner and the key of the inputs it was made for (_key): calls
        # with that key run it directly, after one comparison. Every other call is checked
        # input by input and runs through CompiledGraph.run_checked.
        self._fast = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs or not self._positional or len(args) != len(self._checks):
            args = self._flatten(args, kwargs)
        fast = self._fast
        try:
            hit = fast is not None and _key(args) == fast[0]
        except AttributeError:  # not a tensor: the checked path says which
            hit = False
        outs = fast[1](self._lifted + list(args)) if hit else self._call_checked(args)
        return pytree.tree_unflatten(list(outs), self._out_spec)

    def _flatten(self, args, kwargs) -> tuple:
        flat, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._in_spec:
            raise ExportError(f"tessera.export: the call's arguments are structured as {spec}, "
                              f"the exported model takes {self._in_spec}")
        return tuple(flat)

    def _call_checked(self, args) -> Any:
        for check, a in zip(self._checks, args):
            check.check(a)
        if torch.is_grad_enabled() and any(a.requires_grad for a in args):
            raise ExportError("tessera.export: an exported model runs inference only; call it "
                              "under torch.no_grad() or with inputs that do not require grad")
        graph = self.compiled_graph
        outs = graph.run_checked(self._lifted + list(args))
        if self._fast is None and not graph.dynamic:
            runner = graph.static_runner()  # made by this first call
            if runner is not None:
                self._fast = (_key(args), runner)
        return outs


def _key(args) -> tuple:
    """What a static graph's runner assumes of its inputs; requires_grad included, so that a
    call needing the grad-mode check never takes the fast path."""
    return tuple((a.shape, a.stride(), a.dtype, a.device, a.requires_grad) for a in args)


def _lifted_tensor(program: torch.export.ExportedProgram, spec) -> torch.Tensor:
    if spec.kind == InputKind.PARAMETER or (spec.kind == InputKind.BUFFER and spec.persistent):
        t = program.state_dict[spec.target]
    elif spec.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
        t = program.constants[spec.target]
    else:
        raise ExportError(f"tessera.export: inputs of kind {spec.kind.name} are not supported")
    # detach() shares storage and version counter: in-place changes to the model's tensor stay
    # visible (and invalidate packed copies), while ATen steps record no autograd graph.
    return t.detach()


# torch.export asserts an intermediate's dtype and device where the model converted it (`.to`).
# Both follow from the graph and the inputs' dtypes and devices, which every call checks, so the
# assertion holds by construction; left in, it would run as an ATen call and split the partition
# around it. (Assertions on symbolic sizes, _assert_scalar, stay: they may say more than the
# input ranges.)
_ASSERTIONS = {torch.ops.aten._assert_tensor_metadata.default}


def _drop_assertions_and_input_clones(gm: torch.fx.GraphModule, lifted: int) -> None:
    """Removes assertion nodes, and clones of lifted tensors (torch.export copies a constant
    before a model's code uses it, e.g. an empty key/value cache before a cat). The graph is
    functional (run_decompositions), so nothing writes to a clone and the tensor itself can be
    read instead; a clone the graph returns stays (an output must not alias a weight)."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"][:lifted]
    for n in list(graph.nodes):
        if n.op != "call_function":
            continue
        if n.target in _ASSERTIONS and not n.users:
            graph.erase_node(n)
        elif (n.target is torch.ops.aten.clone.default and n.args[0] in placeholders
              and not n.kwargs.get("memory_format") and all(u.op != "output" for u in n.users)):
            n.replace_all_uses_with(n.args[0])
            graph.erase_node(n)
    graph.lint()
    gm.recompile()


def _check_signature(program: torch.export.ExportedProgram) -> None:
    for spec in program.graph_signature.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            raise ExportError(f"tessera.export: the model mutates its {spec.target or 'input'} "
                              f"({spec.kind.name}); export it in eval mode, or use torch.compile")


def export(model: Any, args: Sequence[Any], kwargs: Optional[Dict[str, Any]] = None, *,
           dynamic_shapes: Any = None, mode: Optional[str] = None,
           options: Optional[dict] = None) -> ExportedModel:
    """Compiles `model` (an nn.Module or a function of tensors) for inputs like `args` and
    `kwargs` ahead of time; `mode` and `options` are torch.compile's for backend="tessera".
    The kernels are built on the first call with real inputs (the examples' values are not
    assumed to be the data), so call it once to warm up."""
    opts = parse_options(mode, options)
    module = model if isinstance(model, torch.nn.Module) else _Module(model)
    with warnings.catch_warnings():
        # torch 2.13's own deprecation notice, raised inside torch.export when it copies specs
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        program = torch.export.export(module, tuple(args), kwargs or {},
                                      dynamic_shapes=dynamic_shapes)
        program = program.run_decompositions(decomposition_table())
    _check_signature(program)
    specs = program.graph_signature.input_specs
    placeholders = [n for n in program.graph_module.graph.nodes if n.op == "placeholder"]
    lifted, checks, weights = [], [], []
    for i, (spec, node) in enumerate(zip(specs, placeholders)):
        if spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise ExportError(f"tessera.export: input {len(checks)} is a "
                                  f"{type(val).__name__}; exported inputs must be tensors")
            checks.append(_InputCheck(len(checks), val, program.range_constraints))
        else:
            if checks:
                raise ExportError("tessera.export: a lifted parameter follows a user input "
                                  "(a torch.export signature this version does not know)")
            lifted.append(_lifted_tensor(program, spec))
            weights.append(i)
    _drop_assertions_and_input_clones(program.graph_module, len(lifted))
    graph = CompiledGraph(program.graph_module, opts, "inference",
                          weight_inputs=frozenset(weights))
    return ExportedModel(program, graph, lifted, checks)


__all__ = ["export", "ExportedModel", "ExportError"]
