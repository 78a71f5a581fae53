"""The package imports and its compiled core answers."""

import re

import tessera
from tessera import _C


def test_version_comes_from_compiled_core():
    assert tessera.__version__ == _C.version()


def test_version_is_semantic():
    assert re.fullmatch(r"\d+\.\d+\.\d+", _C.version()), _C.version()


def test_compiled_module_is_an_extension():
    # A pure-Python stand-in named _C would pass the checks above; the real one is a .so.
    assert _C.__file__.endswith(".so")
