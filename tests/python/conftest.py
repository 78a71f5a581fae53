"""Shared pytest setup for the Python tests.

The package is found through the editable install (`make build`); if it is not installed,
fall back to the source tree so `pytest tests/python` works right after a CMake build.
"""

import atexit
import os
import shutil
import sys
import tempfile

import pytest

# Tests never read or write the user's records database (~/.cache/tessera/records.db): every
# test run gets a fresh one, so no test depends on what an earlier run stored. It is removed
# when the run ends.
_RECORDS_DIR = tempfile.mkdtemp(prefix="tessera-tests-")
atexit.register(shutil.rmtree, _RECORDS_DIR, ignore_errors=True)
os.environ["TESSERA_RECORDS_DB"] = os.path.join(_RECORDS_DIR, "records.db")

try:
    import tessera  # noqa: F401
except ImportError:
    _PKG_ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "torch_backend")
    sys.path.insert(0, os.path.abspath(_PKG_ROOT))


@pytest.fixture(autouse=True)
def _fresh_search_model():
    """Every test starts from an empty search cost model, as a fresh process does. The model
    and its training set are one per process (Ansor's one model across tasks), so without this
    a test's searches retrain on every earlier test's measurements: the task-scheduler tests
    took 16-21 s late in the suite against 6-7 s on their own."""
    from tessera import _C
    _C.reset_search_model()
    yield
