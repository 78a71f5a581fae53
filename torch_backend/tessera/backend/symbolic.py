"""Symbolic sizes of a graph traced with dynamic shapes: Dynamo's SymInts as Tessera size variables.

Under torch.compile(dynamic=True) or torch._dynamo.mark_dynamic, the ATen graph's values carry
SymInt shapes (node.meta["val"]): sympy expressions over Dynamo's size symbols. Each symbol
becomes one Tessera size variable whose range is, in order of preference, Dynamo's own range
for it (its shape-environment constraints, e.g. [2, 512] from a position-embedding table)
narrowed by the range the user declared (options={"dynamic_ranges": {...}}), with
DEFAULT_MAX_SIZE as the upper end where neither bounds it. Kernels built over these variables
take their sizes at run time (kernel_build.KernelCall infers them from the inputs' shapes), so
one plan serves every size in the range; a call with a size outside it is planned for its own
signature instead (graph.py), never rejected.

Declared ranges are keyed by the input's dimension as the user names it, "input_ids.size(1)"
(Dynamo's source "L['input_ids'].size()[1]" shortened; a positional argument is "args[0]"), or
"*" for every dynamic size.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import sympy
import torch
import torch.fx as fx
from torch.utils._sympy.numbers import int_oo

from .. import _C
from .meta import TensorMeta

# Upper end of a size variable's range when neither Dynamo nor the user bounds it.
DEFAULT_MAX_SIZE = 1 << 16
# Lower end when Dynamo does not bound it: Dynamo specialises sizes 0 and 1, so a symbolic size
# is at least 2.
DEFAULT_MIN_SIZE = 2


class NotSizeGeneric(Exception):
    """A partition (or graph) that cannot be compiled once for every size in its range."""


@dataclasses.dataclass(frozen=True)
class SizeSymbol:
    symbol: sympy.Symbol
    var: Any                 # the Tessera size variable (_C.Expr)
    lo: int
    hi: int
    placeholder: int         # graph input that holds the value ...
    dim: Optional[int]       # ... as this dimension of a tensor, or itself (None: a SymInt)
    source: str              # how the user names it ("input_ids.size(1)")


def _short_source(name: str) -> str:
    """Dynamo's source name shortened: "L['x'].size()[1]" -> "x.size(1)"."""
    name = re.sub(r"^L\['([^']+)'\]", r"\1", name)
    return re.sub(r"\.size\(\)\[(\d+)\]$", r".size(\1)", name)


def _bound(v: Any, default: int) -> int:
    """A range end as an int; the default for an unbounded end (sympy's and torch's
    infinities)."""
    if v in (int_oo, -int_oo) or getattr(v, "is_infinite", False):
        return default
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return default


def _sym_expr(d: Any) -> Any:
    """A shape entry as a sympy expression (ints as sympy Integers)."""
    if isinstance(d, torch.SymInt):
        return d.node.expr
    return sympy.Integer(int(d))


class SymbolicShapes:
    """The size symbols of one graph and the symbolic shape of each of its values."""

    def __init__(self, gm: fx.GraphModule, declared: Optional[Mapping[str, Tuple[int, int]]]):
        self.gm = gm
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.symbols: Dict[sympy.Symbol, SizeSymbol] = {}
        self._find_symbols(dict(declared or {}))

    # ---- symbols ------------------------------------------------------------------------------

    def _find_symbols(self, declared: Dict[str, Tuple[int, int]]) -> None:
        for i, p in enumerate(self.placeholders):
            val = p.meta.get("val")
            if isinstance(val, torch.SymInt):
                self._bind(val, i, None, declared)
            elif isinstance(val, torch.Tensor):
                for d, size in enumerate(val.shape):
                    if isinstance(size, torch.SymInt):
                        self._bind(size, i, d, declared)
        for p in self.placeholders:  # every symbol a value mentions must be readable off an input
            for s in self._free_symbols(p.meta.get("val")):
                if s not in self.symbols:
                    raise NotSizeGeneric(f"size {s} is not a plain input dimension")

    def _bind(self, size: torch.SymInt, index: int, dim: Optional[int],
              declared: Dict[str, Tuple[int, int]]) -> None:
        expr = size.node.expr
        if not isinstance(expr, sympy.Symbol) or expr in self.symbols:
            return
        env = size.node.shape_env
        vr = env.var_to_range.get(expr)
        sources = [_short_source(s.name) for s in env.var_to_sources.get(expr, [])]
        lo = _bound(vr.lower, DEFAULT_MIN_SIZE) if vr is not None else DEFAULT_MIN_SIZE
        hi = _bound(vr.upper, DEFAULT_MAX_SIZE) if vr is not None else DEFAULT_MAX_SIZE
        key = next((s for s in sources if s in declared), "*" if "*" in declared else None)
        if key is not None:
            dlo, dhi = declared[key]
            lo, hi = max(lo, int(dlo)), min(hi, int(dhi))
        if lo > hi:
            raise NotSizeGeneric(f"empty range [{lo}, {hi}] for {sources or expr}")
        var = _C.size_var(str(expr), lo, hi)
        self.symbols[expr] = SizeSymbol(expr, var, lo, hi, index, dim,
                                        sources[0] if sources else str(expr))

    @staticmethod
    def _free_symbols(val: Any):
        sizes = []
        if isinstance(val, torch.SymInt):
            sizes = [val]
        elif isinstance(val, torch.Tensor):
            sizes = list(val.shape) + list(val.stride())
        for s in sizes:
            if isinstance(s, torch.SymInt):
                yield from s.node.expr.free_symbols

    def values(self, args: List[Any]) -> Dict[sympy.Symbol, int]:
        """The symbols' values in a call with these graph inputs."""
        return {s.symbol: int(args[s.placeholder]) if s.dim is None
                else int(args[s.placeholder].shape[s.dim]) for s in self.symbols.values()}

    def in_range(self, args: List[Any]) -> bool:
        """Does the plan made for the range serve a call with these graph inputs?"""
        for s in self.symbols.values():
            a = args[s.placeholder]
            v = a if s.dim is None else a.shape[s.dim]
            if v < s.lo or v > s.hi:
                return False
        return True

    def recorded(self, metas: Mapping[fx.Node, Any]) -> Dict[str, int]:
        """The sizes of the call the metas were recorded on, by variable name."""
        out = {}
        for s in self.symbols.values():
            m = metas[self.placeholders[s.placeholder]]
            out[str(s.symbol)] = int(m) if s.dim is None else int(m.shape[s.dim])
        return out

    def sources(self) -> Dict[str, Tuple[fx.Node, Optional[int]]]:
        """Where a call's runner reads each size: (graph input, its dimension or None)."""
        return {str(s.symbol): (self.placeholders[s.placeholder], s.dim)
                for s in self.symbols.values()}

    def ranges(self) -> tuple:
        """(name, lo, hi) of every size variable."""
        return tuple((str(s.symbol), s.lo, s.hi) for s in self.symbols.values())

    def describe(self) -> str:
        return ", ".join(f"{s.source} in [{s.lo}, {s.hi}]" for s in self.symbols.values())

    # ---- shapes -------------------------------------------------------------------------------

    def to_te(self, expr: Any) -> Any:
        """A sympy size expression as an int or a Tessera expression over the size variables."""
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        if expr.is_Symbol:
            if expr not in self.symbols:
                raise NotSizeGeneric(f"unknown size symbol {expr}")
            return self.symbols[expr].var
        name = type(expr).__name__
        args = [self.to_te(a) for a in expr.args]
        if isinstance(expr, sympy.Add):
            out = args[0]
            for a in args[1:]:
                out = out + a
            return out
        if isinstance(expr, sympy.Mul):
            out = args[0]
            for a in args[1:]:
                out = out * a
            return out
        if name == "FloorDiv":
            return args[0] // args[1]
        if name in ("Mod", "PythonMod"):
            return args[0] % args[1]
        raise NotSizeGeneric(f"size expression {expr} ({name}) has no Tessera form")

    def shape(self, val: torch.Tensor) -> tuple:
        """A traced tensor value's shape with Tessera size variables."""
        return tuple(self.to_te(_sym_expr(d)) for d in val.shape)

    def is_symbolic(self, node: fx.Node) -> bool:
        """Does the node's value (a tensor's shape or strides, or a scalar) depend on a size?"""
        val = node.meta.get("val")
        if isinstance(val, (list, tuple)):
            return any(next(self._free_symbols(v), None) is not None for v in val)
        if isinstance(val, (torch.SymFloat, torch.SymBool)):
            return True
        return next(self._free_symbols(val), None) is not None

    # ---- a second size, for checking that kernels are size-generic ---------------------------

    def probe_sizes(self, recorded: Dict[sympy.Symbol, int]) -> Dict[sympy.Symbol, int]:
        """For every symbol a value in its range other than the recorded one (the smallest one
        above the range's bottom, to keep the check cheap)."""
        out = {}
        for sym, s in self.symbols.items():
            cands = [v for v in (s.lo + 1, s.lo, s.lo + 2) if s.lo <= v <= s.hi
                     and v != recorded.get(sym)]
            if not cands:
                raise NotSizeGeneric(f"{s.source}: its range [{s.lo}, {s.hi}] has one size")
            out[sym] = cands[0]
        return out

    def probe_args(self, args: List[Any], sizes: Dict[sympy.Symbol, int]) -> List[Any]:
        """Graph inputs at the probe sizes: weights and other static inputs as they are, symbolic
        ones made up (normal floats, zero integers: valid indices, random bools)."""
        out = []
        for p, a in zip(self.placeholders, args):
            val = p.meta.get("val")
            if isinstance(val, torch.SymInt):
                out.append(int(val.node.expr.subs(sizes)))
            elif isinstance(val, torch.Tensor) and self.is_symbolic(p):
                shape = [int(_sym_expr(d).subs(sizes)) for d in val.shape]
                stride = [int(_sym_expr(d).subs(sizes)) for d in val.stride()]
                out.append(_made_up(shape, stride, a.dtype, a.device))
            else:
                out.append(a)
        return out


class SymbolicMetas(Mapping):
    """The recorded metas of a graph's values with symbolic shapes where they depend on the
    sizes (what kernels are built over); size-dependent scalars as size expressions."""

    def __init__(self, metas: Mapping[fx.Node, Any], shapes: SymbolicShapes):
        self.metas = metas
        self.shapes = shapes
        self._cache: Dict[fx.Node, Any] = {}

    def __getitem__(self, node: fx.Node) -> Any:
        if node not in self._cache:
            self._cache[node] = self._symbolic(node, self.metas[node])
        return self._cache[node]

    def __iter__(self) -> Iterator[fx.Node]:
        return iter(self.metas)

    def __len__(self) -> int:
        return len(self.metas)

    def _symbolic(self, node: fx.Node, meta: Any) -> Any:
        if not self.shapes.is_symbolic(node):
            return meta
        val = node.meta.get("val")
        if isinstance(meta, TensorMeta) and isinstance(val, torch.Tensor):
            return dataclasses.replace(meta, shape=self.shapes.shape(val))
        if isinstance(meta, (list, tuple)) and isinstance(val, (list, tuple)) \
                and len(meta) == len(val):
            return type(meta)(dataclasses.replace(m, shape=self.shapes.shape(v))
                              if isinstance(m, TensorMeta) and isinstance(v, torch.Tensor) else m
                              for m, v in zip(meta, val))
        if isinstance(val, torch.SymInt):
            return self.shapes.to_te(val.node.expr)
        raise NotSizeGeneric(f"{node.name}: its value depends on the sizes")


def _made_up(shape, stride, dtype, device) -> torch.Tensor:
    size = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
    base = torch.empty(size, dtype=dtype, device=device)
    if dtype.is_floating_point:
        base.normal_()
    elif dtype == torch.bool:
        base.copy_(torch.rand(size) > 0.5)
    else:
        base.zero_()
    return base.as_strided(shape, stride)


def analyse(gm: fx.GraphModule, declared) -> Optional[SymbolicShapes]:
    """The graph's size symbols, or None when it has none."""
    shapes = SymbolicShapes(gm, declared)
    return shapes if shapes.symbols else None


def close(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Do a kernel's and eager's values agree (exactly for integers and bools)?"""
    if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        return False
    if not want.dtype.is_floating_point:
        return bool(torch.equal(got, want))
    scale = float(want.abs().max()) if want.numel() else 0.0
    return bool(torch.allclose(got, want, rtol=PROBE_RTOL, atol=PROBE_ATOL * max(1.0, scale),
                               equal_nan=True))


PROBE_RTOL = 1e-3  # relative tolerance of the probe check (fused reductions reorder sums)
PROBE_ATOL = 1e-4  # absolute tolerance, scaled by the largest magnitude of eager's value


class Probe:
    """The graph run eagerly once at other sizes (probe_sizes), every value kept: a kernel of a
    plan for a range of sizes must reproduce its partition's values there as well as at the
    recorded sizes. That catches any size a lowering baked in as a constant."""

    def __init__(self, gm: fx.GraphModule, shapes: SymbolicShapes, args: List[Any]):
        self.gm = gm
        self.shapes = shapes
        self.args = args
        self.sizes: Dict[sympy.Symbol, int] = {}
        self._env: Optional[Dict[fx.Node, Any]] = None

    def _values(self) -> Dict[fx.Node, Any]:
        if self._env is None:
            self.sizes = self.shapes.probe_sizes(self.shapes.values(self.args))
            interp = fx.Interpreter(self.gm, garbage_collect_values=False)
            with torch.no_grad():
                interp.run(*self.shapes.probe_args(self.args, self.sizes))
            self._env = interp.env
        return self._env

    def check(self, spec: Any, call: Any) -> None:
        """Raises NotSizeGeneric unless the kernel call matches eager at the probe sizes."""
        env = self._values()
        by_name = {str(s): v for s, v in self.sizes.items()}
        sizes = [by_name[n] for n in call.size_names] if call.symbolic else None
        got = call(*[env[n] for n in spec.inputs], sizes=sizes)
        got = got if isinstance(got, tuple) else (got,)
        for o, g in zip(spec.outputs, got):
            if not close(g, env[o]):
                sizes = ", ".join(f"{self.shapes.symbols[s].source}={v}"
                                  for s, v in self.sizes.items())
                raise NotSizeGeneric(f"{spec.name}: {o.name} differs from eager at {sizes}")
