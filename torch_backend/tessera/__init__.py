"""Tessera: a tensor compiler for PyTorch.

The C++ core is the compiled module ``tessera._C`` (built by CMake into this directory).
``tessera.te_ops`` builds tensor-expression graphs from the operator library,
``tessera.Kernel`` compiles them into CPU kernels callable with torch tensors, and
``tessera.op("C[i, j] = sum(k) A[i, k] * B[k, j]")`` makes a custom op from an expression.
"""

from . import _C
from ._C import ops as te_ops
from ._C import placeholder, size_var
from .expr_op import op
from .kernel import Kernel

__version__ = _C.version()

# One pool size for both runtimes: Tessera's kernels and ATen's never oversubscribe the cores.
import torch as _torch  # noqa: E402

_C.set_num_threads(_torch.get_num_threads())


def set_num_threads(n: int) -> None:
    """Threads used by Tessera kernels (keep equal to torch.get_num_threads())."""
    _C.set_num_threads(n)


def get_num_threads() -> int:
    return _C.get_num_threads()


# torch.compile(model, backend="tessera") works after `import tessera` (and, through the
# torch_dynamo_backends entry point in setup.py, without it).
from . import backend  # noqa: E402

backend.register()


__all__ = ["__version__", "Kernel", "op", "placeholder", "size_var", "te_ops", "set_num_threads",
           "get_num_threads", "backend"]
