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


def _malloc_state(env):
    import json
    import os
    import subprocess
    import sys
    code = ("import json, tessera.allocator as a, tessera; "
            "print(json.dumps(a.state))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_keeps_freed_memory_unless_told_not_to():
    # glibc's thresholds are set at import (allocator.py); TESSERA_MALLOC=system leaves malloc
    # as it was, and says so.
    assert _malloc_state({"TESSERA_MALLOC": ""}) == {"applied": True, "reason": "set"}
    assert _malloc_state({"TESSERA_MALLOC": "system"}) == {
        "applied": False, "reason": "TESSERA_MALLOC=system"}
