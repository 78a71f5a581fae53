"""Peer runtimes timed beside Tessera in the model benchmarks (models.py, zoo.py).

OpenVINO is the strongest CPU inference runtime, and it is run the way its users run it: the
model converted natively (`ov.convert_model(model, example_input=...)`), compiled for the CPU
at fp32 (`INFERENCE_PRECISION_HINT=f32`) with as many threads as torch uses and the latency
hint, called through one infer request on the input's memory. (OpenVINO's own torch.compile
backend fails on most models under the torch this project pins, so the native path is the fair
peer.) It is a benchmark-only dependency: `make peers` installs it, and without it, or where a
model does not convert, the column is empty and the record says why.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional

import torch

# The release the benchmarks are measured against (installed by `make peers`).
OPENVINO_VERSION = "2026.4.1"


@dataclasses.dataclass
class PeerRun:
    """A peer's compiled model: `run` does one inference on the benchmark's input (None where
    the peer could not run the model: `note` says why)."""
    run: Optional[Callable[[], object]]
    note: str = ""
    compile_s: float = float("nan")
    max_abs_err: float = float("nan")


def openvino_available() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def openvino_run(model: torch.nn.Module, x: torch.Tensor, reference: torch.Tensor,
                 tolerance: float) -> PeerRun:
    """The model converted and compiled by OpenVINO (compile_s: conversion + compilation),
    checked against eager's `reference` output; a model that does not convert or differs
    beyond `tolerance` gets no run and a note."""
    if not openvino_available():
        return PeerRun(None, f"openvino not installed (make peers installs {OPENVINO_VERSION})")
    import openvino as ov
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            converted = ov.convert_model(model, example_input=x)
        compiled = ov.Core().compile_model(converted, "CPU", {
            "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": torch.get_num_threads()})
    except Exception as e:  # a model OpenVINO cannot take is a note in its record
        return PeerRun(None, f"does not convert: {type(e).__name__}: {_failure_line(e)}")
    compile_s = time.perf_counter() - t0
    request = compiled.create_infer_request()
    inputs = [x.numpy()]

    def run():
        request.infer(inputs, share_inputs=True, share_outputs=True)
        return request.get_output_tensor(0).data

    out = torch.from_numpy(run().copy())
    if out.shape != reference.shape:
        return PeerRun(None, f"output shape {tuple(out.shape)}, eager's "
                       f"{tuple(reference.shape)}", compile_s)
    max_abs_err = (out - reference).abs().max().item() if out.numel() else 0.0
    if not torch.allclose(out, reference, rtol=tolerance, atol=tolerance):
        return PeerRun(None, f"differs from eager by {max_abs_err:.3g}", compile_s, max_abs_err)
    return PeerRun(run, "", compile_s, max_abs_err)


def _failure_line(e: Exception) -> str:
    """The line of a conversion error that names what failed (OpenVINO's summary line, where
    the error has one), else its first line."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    named = [line for line in lines if "Conversion is failed for" in line]
    return (named or lines or [""])[0][:200]
