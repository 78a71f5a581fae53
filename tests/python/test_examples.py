"""The examples run as documented: scripts in a fresh interpreter, the quickstart notebook's
code cells in order in one namespace (read from its JSON; no jupyter needed)."""

import contextlib
import io
import json
import os
import subprocess
import sys

import torch

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def run_example(name, *args, timeout=300, env_extra=None):
    env = dict(os.environ)
    root = os.path.abspath(os.path.join(EXAMPLES, "..", "torch_backend"))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args],
                          capture_output=True, text=True, env=env, timeout=timeout)


def test_quickstart(tmp_path):
    out = run_example("quickstart.py",
                      env_extra={"TESSERA_RECORDS_DB": str(tmp_path / "records.db")})
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line for line in out.stdout.splitlines() if "speedup" in line]
    assert [line.split()[0] for line in lines] == ["MLP", "ResNet"]


def test_model_demo_quick(tmp_path):
    """make demo's script on a smaller model (the script checks Tessera's and Inductor's outputs
    against eager itself). Reuse of its records by a second run: test_backend_records.py."""
    out = run_example("model_demo.py", "--quick",
                      env_extra={"TESSERA_RECORDS_DB": str(tmp_path / "records.db")})
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line.split()[0] for line in out.stdout.splitlines()
            if line.endswith("x") and " ms " in line]
    assert rows == ["eager", "inductor", "tessera"], out.stdout
    assert "Tessera speedup:" in out.stdout
    compile_line = next(line for line in out.stdout.splitlines()
                        if line.startswith("Tessera compile"))
    # A new database: the BERT's projections were tuned, nothing came from records.
    assert "0 from records" in compile_line and " 0 tuned" not in compile_line, compile_line


def notebook_code_cells(name):
    """The code cells of a notebook (nbformat 4 JSON), as source strings, in order."""
    with open(os.path.join(EXAMPLES, name)) as f:
        nb = json.load(f)
    assert nb["nbformat"] == 4
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = cell["source"]
            cells.append("".join(src) if isinstance(src, list) else src)
    return cells


def test_quickstart_notebook_cells_run_in_order(tmp_path, monkeypatch):
    """Runs the notebook's code cells in one namespace, as a kernel would (without jupyter);
    the cells assert their results against eager PyTorch themselves."""
    monkeypatch.setenv("TESSERA_RECORDS_DB", str(tmp_path / "records.db"))
    cells = notebook_code_cells("quickstart.ipynb")
    assert len(cells) >= 4
    joined = "\n".join(cells)
    assert "tessera.op(" in joined and 'backend="tessera"' in joined
    namespace = {"__name__": "__notebook__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for i, src in enumerate(cells):
            exec(compile(src, f"quickstart.ipynb[cell {i}]", "exec"), namespace)
    text = out.getvalue()
    assert "gemm_relu: (64, 48)" in text
    assert "softmax rows sum to 1: True" in text
    assert "compiled block matches eager: (16, 64)" in text
    assert "Tessera kernels" in text
    # The values the cells computed, checked here too (not only by the cells' own asserts).
    a, b = namespace["a"], namespace["b"]
    torch.testing.assert_close(namespace["c"], torch.relu(a @ b), rtol=1e-4, atol=1e-4)
    model, x = namespace["model"], namespace["x"]
    with torch.no_grad():
        torch.testing.assert_close(namespace["y"], model(x), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
