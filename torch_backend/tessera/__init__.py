"""Tessera: a tensor compiler for PyTorch.

The C++ core is the compiled module ``tessera._C`` (built by CMake into this directory).
``tessera.te_ops`` builds tensor-expression graphs from the operator library,
``tessera.Kernel`` compiles them into CPU kernels callable with torch tensors, and
``tessera.op("C[i, j] = sum(k) A[i, k] * B[k, j]")`` makes a custom op from an expression.
"""

from . import _C
from ._C import ops as te_ops
from ._C import placeholder, size_var
from . import timing
from .allocator import keep_freed_memory as _keep_freed_memory
from .expr_op import op
from .kernel import Kernel

__version__ = _C.version()

# One set of threads for both runtimes: Tessera's parallel loops run on torch's OpenMP team, so
# ATen's idle spinning threads never compete with a second pool for the cores, and they use as
# many threads as torch does (torch.set_num_threads applies to both).
# TESSERA_THREAD_POOL=tessera keeps Tessera's own pool, sized like torch's at import.
import os as _os  # noqa: E402

import torch as _torch  # noqa: E402

# Freed tensor memory stays in the process, so kernels do not fault fresh pages on every call
# (allocator.py; TESSERA_MALLOC=system leaves malloc alone).
_keep_freed_memory()

if _os.environ.get("TESSERA_THREAD_POOL", "openmp") == "tessera" or not _C.use_openmp_threads(True):
    _C.set_num_threads(_torch.get_num_threads())


def set_num_threads(n: int) -> None:
    """Pins the threads of Tessera kernels to n. n <= 0 (the default on torch's OpenMP team)
    follows torch.set_num_threads."""
    _C.set_num_threads(n)


def get_num_threads() -> int:
    return _C.get_num_threads()


# torch.compile(model, backend="tessera") works after `import tessera` (and, through the
# torch_dynamo_backends entry point in setup.py, without it).
from . import backend  # noqa: E402
from .backend.kernel_build import jit_cache_info, set_jit_cache_limit  # noqa: E402

backend.register()

from .explain import explain  # noqa: E402
from .aot import ExportedModel, ExportError, export  # noqa: E402


__all__ = ["__version__", "Kernel", "op", "timing", "placeholder", "size_var", "te_ops", "set_num_threads",
           "get_num_threads", "backend", "set_jit_cache_limit", "jit_cache_info", "explain",
           "export", "ExportedModel", "ExportError"]
