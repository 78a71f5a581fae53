"""The examples run as documented (as scripts, in a fresh interpreter)."""

import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def run_example(name, timeout=300):
    env = dict(os.environ)
    root = os.path.abspath(os.path.join(EXAMPLES, "..", "torch_backend"))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name)], capture_output=True,
                          text=True, env=env, timeout=timeout)


def test_quickstart():
    out = run_example("quickstart.py")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line for line in out.stdout.splitlines() if "speedup" in line]
    assert [line.split()[0] for line in lines] == ["MLP", "ResNet"]
