"""Custom operators written as expressions: ``tessera.op("C[i, j] = sum(k) A[i, k] * B[k, j]")``.

The source is a small einsum-like language over the tensor-expression IR (parsed and checked in
C++, csrc/frontend/). One or more statements, separated by ``;`` or new lines, each define a
tensor; the last one is the result, earlier ones are intermediates::

    gemm_relu = tessera.op("C[i, j] = relu(sum(k) A[i, k] * B[k, j])")
    softmax = tessera.op('''
        M[i] = max(j) X[i, j]
        E[i, j] = exp(X[i, j] - M[i])
        Y[i, j] = E[i, j] / sum(k) E[i, k]
    ''')
    conv = tessera.op("O[n, y, x] = sum(c, r, s) I[n, c, y + r, x + s] * W[c, r, s]")

Language summary:

- ``T[i, j] = expr`` defines ``T``; its indices are iterator names (``T[]`` for a scalar).
- Operands: tensor reads ``A[i, k + 1]``, iterators (as numbers), numeric literals.
- Operators: ``+ - * /`` (``/`` is true division), ``//`` and ``%`` (floor division/modulo),
  comparisons ``< <= > >= == !=`` combined with ``and``, ``or``, ``not``.
- Functions: exp, log, sqrt, rsqrt, tanh, erf, sigmoid, abs, relu, gelu, floor, ceil,
  max(a, b), min(a, b), pow(a, b), where(cond, a, b).
- Reductions ``sum(k) body``, ``max(k) body``, ``min(k, l) body``: like a sigma in mathematics
  the body is the product that follows, so ``sum(k) A[i, k] * B[k, j] + b[j]`` adds ``b`` once.
- Indices are integer expressions of iterators and integer constants (``+ - * // %``,
  max/min). Every read must be in bounds for every iterator value, unless it is read under a
  ``where`` whose condition compares that index with constants to keep it inside the tensor:
  ``where(i > 0, X[i - 1], 0.0)`` (zero padding; the read happens only where the condition
  holds, as masked vector loads). Otherwise clamp the index, e.g. ``X[max(i - 1, 0)]``.

Extents of iterators come from the input shapes at call time: an iterator used as a plain index
takes that dim's size (all such uses must agree); one used only in affine index arithmetic takes
the largest extent that keeps those reads in bounds (``I[y + r]`` gives ``y`` the extent
``dim - extent(r) + 1``, a "valid" convolution). Anything else -- e.g. an output index the
right-hand side never uses, or a clamped index like ``X[max(i - 1, 0)]`` -- needs ``shapes=``:
``{iterator: extent}`` (for that name in every statement) or ``{defined_tensor: [sizes]}``.

The returned object is callable with torch tensors (positionally, in order of first appearance
in the source, or by keyword with the tensor names). Calls run a kernel compiled per distinct
set of input shapes and dtypes -- except for sizes declared ``dynamic={name: (lo, hi)}`` (an
iterator, standing for the input dims it indexes by itself, or ``"A.size(d)"``): one
DietCode-tuned kernel serves every size in the range (dynamic_op.py). The op is also registered
as ``torch.ops.tessera.<name>`` with a fake kernel, so it works under
``torch.compile(fullgraph=True)`` (dynamic shapes included) and passes
``torch.library.opcheck``. It has no autograd formula: backward raises.

Mistakes in the source raise ``ExpressionError`` (a ``ValueError``) whose message shows the
source line with a caret under the offending column.
"""

from __future__ import annotations

import hashlib
import keyword
import operator
import threading
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import torch

from . import _C
from .jit_cache import SHAPES_PER_GRAPH, LruCache
from .backend.log import log_once, logger
from .dynamic_op import DynamicCall, DynamicSizes, normalize_dynamic
from .kernel import _DTYPES, Kernel

ExpressionError = _C.ExpressionError

_NAMESPACE = "tessera"
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}
# Registered ops by name: a second op() with the same name must mean the same expression.
_REGISTRY: Dict[str, "ExpressionOp"] = {}
_REGISTRY_LOCK = threading.Lock()

ShapesArg = Optional[Mapping[str, Union[int, Sequence[int]]]]


def _as_int(value, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got {value!r}")
    try:
        return operator.index(value)  # ints, numpy integers, 0-d integer tensors
    except TypeError:
        raise TypeError(f"{what} must be an int, got {value!r}") from None


def _normalize_shapes(shapes: ShapesArg) -> Dict[str, Union[int, list]]:
    out: Dict[str, Union[int, list]] = {}
    for key, value in (shapes or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"shapes keys are iterator or tensor names, got {key!r}")
        if isinstance(value, (list, tuple, torch.Size)):
            out[key] = [_as_int(v, f"shapes[{key!r}] entries") for v in value]
        else:
            out[key] = _as_int(value, f"shapes[{key!r}] (an iterator extent or a list of sizes)")
    return out


def _default_name(output: str, source: str, shapes: Dict[str, Union[int, list]],
                  dynamic: Dict[str, tuple]) -> str:
    text = f"{source}\0{sorted(shapes.items())!r}" + (f"\0{sorted(dynamic.items())!r}"
                                                      if dynamic else "")
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{output}_{digest}"


def _dtype_name(t: torch.Tensor, input_name: str) -> str:
    name = _DTYPE_NAMES.get(t.dtype)
    if name is None:
        supported = ", ".join(str(d) for d in _DTYPES.values())
        raise TypeError(f"input {input_name} has dtype {t.dtype}; supported: {supported}")
    return name


def _eval_formula(f, tensors: Sequence[torch.Tensor]):
    """Evaluates a shape formula from _C.expression_signature on (possibly symbolic) sizes."""
    if isinstance(f, int):
        return f
    op = f[0]
    if op == "dim":
        return tensors[f[1]].shape[f[2]]
    a, b = _eval_formula(f[1], tensors), _eval_formula(f[2], tensors)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "floordiv":
        return a // b
    if op == "mod":
        return a % b
    if op == "min":
        return torch.sym_min(a, b)
    if op == "max":
        return torch.sym_max(a, b)
    raise AssertionError(f"unknown shape formula node {op!r}")


class ExpressionOp:
    """A compiled-on-demand operator defined by an expression (see the module docstring)."""

    def __init__(self, source: str, name: Optional[str] = None, shapes: ShapesArg = None,
                 tune: str = "default", trials: int = 0, records: Any = None,
                 progress: bool = True, runner: Any = None, derive: bool = False,
                 dynamic: Optional[Mapping[str, Sequence[int]]] = None):
        if not isinstance(source, str):
            raise TypeError("tessera.op takes the expression source as a string")
        if tune not in ("default", "construct", "search"):
            raise ValueError(f"tune must be 'default', 'construct' or 'search', got {tune!r}")
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 0:
            raise ValueError(f"trials must be an int >= 0, got {trials!r}")
        self.tune = tune
        self.trials = trials
        self.derive = bool(derive)
        self.derivations: Dict[tuple, dict] = {}  # per input shapes: _C.derive's report
        self._records_option = records
        self._progress = progress
        self._runner = runner
        self._shapes = _normalize_shapes(shapes)
        self._dynamic = normalize_dynamic(dynamic)
        if self._dynamic and derive:
            raise ValueError("derive=True and dynamic= do not combine (derivation is per shape)")
        info = _C.parse_expression(source, self._shapes)  # raises ExpressionError
        self._dynamic_sizes = DynamicSizes(source, self._dynamic, self._shapes)
        self.source = source
        self.inputs: Tuple[str, ...] = tuple(info["inputs"])
        self.output: str = info["output"]
        self.intermediates: Tuple[str, ...] = tuple(info["intermediates"])
        if name is None:
            name = _default_name(self.output, source, self._shapes, self._dynamic)
        elif not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"op name must be a valid identifier, got {name!r}")
        self.name = name
        self._kernels = LruCache(SHAPES_PER_GRAPH)  # per input shapes and dtypes
        self._dynamic_kernels: Dict[tuple, DynamicCall] = {}  # per signature (dynamic_op.py)
        self._signatures: Dict[tuple, tuple] = {}
        self._lock = threading.Lock()
        self._overload = self._register()

    # ---- registration --------------------------------------------------------------------
    def _same_definition(self, other: "ExpressionOp") -> bool:
        return (other.source == self.source and other._shapes == self._shapes
                and other._dynamic == self._dynamic
                and (other.tune, other.trials) == (self.tune, self.trials))

    def _register(self):
        with _REGISTRY_LOCK:
            existing = _REGISTRY.get(self.name)
            if existing is not None:
                if not self._same_definition(existing):
                    raise ValueError(
                        f"torch.ops.{_NAMESPACE}.{self.name} is already defined by a different "
                        f"expression or tuning ({existing.source!r}, tune={existing.tune!r}, "
                        f"trials={existing.trials}); choose another name")
                # Same definition: share the registered op and its compiled kernels.
                self._kernels = existing._kernels
                self._dynamic_kernels = existing._dynamic_kernels
                self._signatures = existing._signatures
                self._lock = existing._lock
                return existing._overload
            # Schema argument names are the tensor names (keywords get a trailing underscore).
            args = ", ".join(f"Tensor {n}_" if keyword.iskeyword(n) else f"Tensor {n}"
                             for n in self.inputs)
            schema = f"({args}) -> Tensor"
            try:
                opdef = torch.library.custom_op(f"{_NAMESPACE}::{self.name}", self._eager,
                                                mutates_args=(), schema=schema)
            except RuntimeError as e:
                raise ValueError(f"cannot register torch.ops.{_NAMESPACE}.{self.name}: {e}") from e
            opdef.register_fake(self._fake)
            self._opdef = opdef  # keeps the registration alive
            _REGISTRY[self.name] = self
            return getattr(getattr(torch.ops, _NAMESPACE), self.name).default

    @property
    def qualified_name(self) -> str:
        return f"{_NAMESPACE}::{self.name}"

    @property
    def torch_op(self):
        """The registered ``torch.ops.tessera.<name>.default`` overload."""
        return self._overload

    # ---- calls ---------------------------------------------------------------------------
    def _bind(self, args, kwargs) -> list:
        if len(args) > len(self.inputs):
            raise TypeError(f"{self.name} takes {len(self.inputs)} inputs "
                            f"({', '.join(self.inputs)}), got {len(args)}")
        bound = dict(zip(self.inputs, args))
        for k, v in kwargs.items():
            if k not in self.inputs:
                raise TypeError(f"{self.name} has no input {k!r}; inputs: {', '.join(self.inputs)}")
            if k in bound:
                raise TypeError(f"{self.name} got input {k!r} twice")
            bound[k] = v
        missing = [n for n in self.inputs if n not in bound]
        if missing:
            raise TypeError(f"{self.name} is missing input(s) {', '.join(missing)}")
        tensors = [bound[n] for n in self.inputs]
        for n, t in zip(self.inputs, tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"input {n} must be a torch.Tensor, got {type(t).__name__}")
        return tensors

    def __call__(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> torch.Tensor:
        return self._overload(*self._bind(args, kwargs))

    def kernel(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> Kernel:
        """The compiled kernel used for inputs like these (compiles on first use)."""
        return self._kernel_for(self._bind(args, kwargs))

    def _kernel_for(self, tensors: Sequence[torch.Tensor]) -> Kernel:
        key = tuple((tuple(t.shape), t.dtype) for t in tensors)
        kernel = self._kernels.get(key)
        if kernel is not None:
            return kernel
        with self._lock:
            kernel = self._kernels.get(key)
            if kernel is None:
                shapes = {n: list(t.shape) for n, t in zip(self.inputs, tensors)}
                dtypes = {n: _dtype_name(t, n) for n, t in zip(self.inputs, tensors)}
                outputs, inputs = _C.expression_to_te(self.source, shapes, dtypes, self._shapes)
                if self.derive:
                    outputs = self._derived(key, outputs, inputs)
                records = None
                if self.tune != "default":
                    from .backend import records as records_mod  # the backend's open databases
                    opened = records_mod.open_records(self._records_option)
                    records = opened.db if opened is not None else None
                kernel = Kernel(outputs, inputs, name=self.name, tune=self.tune,
                                trials=self.trials, records=records, progress=self._progress,
                                runner=self._runner)
                self._kernels.put(key, kernel)
        return kernel

    def _derived(self, key: tuple, outputs, inputs):
        """The outputs of the program EinNet's derivation chose for these shapes (the
        expression's own when none measured faster); the report is kept in `derivations`."""
        report = _C.derive(outputs, inputs, tune=self.tune if self.tune != "search" else
                           "construct")
        self.derivations[key] = {k: v for k, v in report.items()
                                 if k not in ("outputs", "original")}
        if report["found"]:
            logger.info("tessera.op %s: derived in %d rules (%s): %.3f ms -> %.3f ms",
                        self.name, report["depth"], ", ".join(report["rules"]),
                        report["original_ms"], report["derived_ms"])
            return report["outputs"]
        return outputs

    def _eager(self, *tensors: torch.Tensor) -> torch.Tensor:
        for n, t in zip(self.inputs, tensors):
            if t.device.type != "cpu":
                raise ValueError(f"input {n} is on {t.device}; tessera.op kernels run on the CPU")
        if self._dynamic:
            call = self._dynamic_kernel_for(tensors)
            if call is not None:
                return call(*tensors)
        return self._kernel_for(tensors)(*tensors)

    def dynamic_kernel(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> Optional[DynamicCall]:
        """The one kernel serving inputs like these at every size of the dynamic= ranges
        (compiled and tuned on first use), or None when a size lies outside its range."""
        return self._dynamic_kernel_for(self._bind(args, kwargs))

    def _dynamic_kernel_for(self, tensors: Sequence[torch.Tensor]) -> Optional[DynamicCall]:
        sizes = self._dynamic_sizes.sizes(tensors, self.inputs)
        if not self._dynamic_sizes.in_range(sizes):
            log_once(f"dynamic-out-of-range:{self.name}",
                     f"tessera.op {self.name}: sizes {sizes} outside the declared ranges "
                     f"{self._dynamic}; such calls compile a kernel for their own shapes")
            return None
        key = self._dynamic_sizes.signature(tensors)
        call = self._dynamic_kernels.get(key)
        if call is not None:
            return call
        with self._lock:
            call = self._dynamic_kernels.get(key)
            if call is None:
                shapes = {n: list(t.shape) for n, t in zip(self.inputs, tensors)}
                dtypes = {n: _dtype_name(t, n) for n, t in zip(self.inputs, tensors)}
                dynamic = [(n, lo, hi) for n, (lo, hi) in self._dynamic.items()]
                outputs, inputs = _C.expression_to_te_dynamic(self.source, shapes, dtypes,
                                                              self._shapes, dynamic)
                from .backend import records as records_mod  # the backend's open databases
                call = DynamicCall(self.name, outputs, inputs, self._dynamic_sizes,
                                   records_mod.open_records(self._records_option))
                self._dynamic_kernels[key] = call
        return call

    def _fake(self, *tensors: torch.Tensor) -> torch.Tensor:
        key = tuple((t.dim(), t.dtype) for t in tensors)
        sig = self._signatures.get(key)
        if sig is None:
            ranks = {n: t.dim() for n, t in zip(self.inputs, tensors)}
            dtypes = {n: _dtype_name(t, n) for n, t in zip(self.inputs, tensors)}
            sig = _C.expression_signature(self.source, ranks, dtypes, self._shapes)
            self._signatures[key] = sig
        dtype, formulas = sig
        shape = [_eval_formula(f, tensors) for f in formulas]
        if tensors:
            return tensors[0].new_empty(shape, dtype=_DTYPES[dtype])
        return torch.empty(shape, dtype=_DTYPES[dtype])

    def __repr__(self) -> str:
        name = getattr(self, "name", "?")  # repr may run on a half-built op (errors in __init__)
        return f"<tessera.op {_NAMESPACE}::{name}: {getattr(self, 'source', '').strip()!r}>"


def op(source: str, name: Optional[str] = None, shapes: ShapesArg = None, tune: str = "default",
       trials: int = 0, records: Any = None, progress: bool = True,
       runner: Any = None, derive: bool = False,
       dynamic: Optional[Mapping[str, Sequence[int]]] = None) -> ExpressionOp:
    """Defines an operator from an expression; see the module docstring for the language.

    ``name`` names the registered ``torch.ops.tessera.<name>`` (default: the output tensor's
    name and a short hash of the source). ``shapes`` gives extents the inputs cannot determine:
    ``{iterator: extent}`` or ``{defined_tensor: [sizes]}``. Raises ``ExpressionError`` (a
    ValueError) with a caret under the offending column for mistakes in the source.

    ``tune`` chooses how each shape's kernel is scheduled: "default" (the rules), "construct"
    (Gensor's construct mode, about a second) or "search" (search mode with ``trials``
    measurements, 0 for the policy's default; ``progress`` shows a bar). Tuned schedules go to
    the records database ``records`` (None: the default one, a path, or False for none), so a
    later process reuses them. ``runner`` says where search mode measures (see tessera.Kernel).

    ``derive=True`` runs EinNet's derivation (csrc/derive/) on each shape's expression: programs
    equivalent to it, built from matmuls, convolutions and memory-bound eOperators, are verified
    and measured, and the fastest is compiled instead when it beats the expression's own kernel
    (the rules applied are logged on the "tessera" logger and kept in ``op.derivations``).

    ``dynamic={"i": (1, 4096)}`` declares sizes that vary from call to call: the input dims an
    iterator indexes by itself (or ``"A.size(0)"``) become one size variable with that range,
    and DietCode tunes one kernel for the whole range (micro-kernels compiled once and a
    dispatcher; kept in ``records`` for later processes), whatever ``tune`` says: calls at any
    size in the range run it without compiling. A size outside its range compiles a kernel for
    its shapes, as without dynamic=.
    """
    return ExpressionOp(source, name=name, shapes=shapes, tune=tune, trials=trials,
                        records=records, progress=progress, runner=runner, derive=derive,
                        dynamic=dynamic)


__all__ = ["op", "ExpressionOp", "ExpressionError"]
