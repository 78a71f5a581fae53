"""Shared pytest setup for the Python tests.

The package is found through the editable install (`make build`); if it is not installed,
fall back to the source tree so `pytest tests/python` works right after a CMake build.
"""

import os
import sys
import tempfile

# Tests never read or write the user's records database (~/.cache/tessera/records.db): every
# test run gets a fresh one, so no test depends on what an earlier run stored.
os.environ["TESSERA_RECORDS_DB"] = os.path.join(tempfile.mkdtemp(prefix="tessera-tests-"),
                                                "records.db")

try:
    import tessera  # noqa: F401
except ImportError:
    _PKG_ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "torch_backend")
    sys.path.insert(0, os.path.abspath(_PKG_ROOT))
