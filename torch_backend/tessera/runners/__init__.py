"""Where search mode measures candidates, beyond this machine.

A runner is an object with ``measure(dag_text, schedules_json, parallel) -> list[dict]``: the
workload as its canonical text with plan hints, its candidate schedules as JSON in canonical
names, and one result dict (ok, error, median_ms, build_ms) per schedule, in order
(``tessera._C.measure_canonical`` is what a worker runs). ``_C.python_runner(runner)`` turns it
into the C++ ``Runner`` that a compile request's search measures on.

    make_runner("ray")              a local Ray instance (or the one this process joined)
    make_runner("auto")             the Ray cluster this machine belongs to
    make_runner("ray://host:port")  a remote Ray cluster, through Ray Client
"""

import threading

_RUNNERS = {}
_LOCK = threading.Lock()


def is_runner_spec(spec) -> bool:
    """Whether `spec` names a runner this module makes."""
    return isinstance(spec, str) and (spec in ("ray", "local", "auto") or spec.startswith("ray://"))


def make_runner(spec):
    """The runner `spec` names (see the module's doc); one per spec and process, since a runner
    starts workers. An object with a measure() method is returned as it is."""
    if hasattr(spec, "measure"):
        return spec
    if not is_runner_spec(spec):
        raise ValueError(f"runner must be 'ray', 'auto' or 'ray://host:port', got {spec!r}")
    with _LOCK:
        if spec not in _RUNNERS:
            from .ray_runner import RayRunner
            _RUNNERS[spec] = RayRunner(address=None if spec in ("ray", "local") else spec)
        return _RUNNERS[spec]


def native_runner(spec):
    """The C++ Runner (tessera._C.Runner) measuring on make_runner(spec)."""
    from .. import _C
    if isinstance(spec, _C.Runner):
        return spec
    return _C.python_runner(make_runner(spec))


__all__ = ["is_runner_spec", "make_runner", "native_runner"]
