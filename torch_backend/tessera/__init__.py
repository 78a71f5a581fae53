"""Tessera: a tensor compiler for PyTorch.

The C++ core is the compiled module ``tessera._C`` (built by CMake into this directory).
"""

from . import _C

__version__ = _C.version()

__all__ = ["__version__"]
