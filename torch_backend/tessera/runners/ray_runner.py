"""Measuring search candidates on a Ray cluster.

Each actor is a measurement worker: it imports tessera, runs its kernels on `threads_per_worker`
threads and measures batches with ``_C.measure_canonical``. A batch stays on one actor: its
candidates are verified against the task's default schedule and timed paired against each
other in that one process, which is what makes their times comparable (two actors, maybe on two
machines, would time a candidate under different load and clocks). Concurrent batches (several
tasks tuned at once) go to different actors.
"""

import os
import threading

_RAY_MISSING = ("the 'ray' runner needs Ray: pip install ray==2.60.0 "
                "(`make deps` installs it)")


def _import_ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError(_RAY_MISSING) from e
    return ray


class _MeasureWorker:
    """The actor's class (made a Ray actor in RayRunner, so this module imports without Ray)."""

    def __init__(self, threads: int):
        import tessera
        tessera.set_num_threads(threads)
        self._C = tessera._C

    def measure(self, dag_text, schedules, parallel):
        return self._C.measure_canonical(dag_text, list(schedules), parallel)

    def ready(self):
        return True


def _failed(n, why):
    return [{"ok": False, "error": why, "median_ms": 0.0, "build_ms": 0.0} for _ in range(n)]


def _package_root():
    import tessera
    return os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))


class RayRunner:
    """Runner on a Ray cluster: `address` None or "local" starts a local Ray instance (unless this
    process already joined one), "auto" joins this machine's cluster, "ray://host:port" a remote
    one. `num_workers` actors (default: the cluster's CPUs // threads_per_worker) each run
    kernels on `threads_per_worker` threads (default: this process's Tessera threads, so that
    candidates are timed as the kernel will run here)."""

    name = "ray"

    def __init__(self, address=None, num_workers=None, threads_per_worker=None):
        ray = self._ray = _import_ray()
        if not ray.is_initialized():
            if address in (None, "local"):
                # Workers find tessera where this process found it.
                ray.init(include_dashboard=False, log_to_driver=False,
                         runtime_env={"env_vars": {"PYTHONPATH": self._worker_pythonpath()}})
            else:
                ray.init(address=address, log_to_driver=False)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        if threads_per_worker is None:
            import tessera
            threads_per_worker = tessera.get_num_threads()
        self.threads_per_worker = max(1, min(int(threads_per_worker), cpus))
        count = num_workers if num_workers is not None else cpus // self.threads_per_worker
        if count < 1:
            raise ValueError(f"num_workers must be at least 1, got {num_workers}")
        self._actor_class = ray.remote(num_cpus=self.threads_per_worker, max_restarts=0)(
            _MeasureWorker)
        self._lock = threading.Lock()
        self._actors = [self._start() for _ in range(count)]
        self._busy = [0] * count
        self.restarts = 0

    @staticmethod
    def _worker_pythonpath():
        parts = [_package_root()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                     if p]
        return os.pathsep.join(dict.fromkeys(parts))

    def _start(self):
        return self._actor_class.remote(self.threads_per_worker)

    @property
    def num_workers(self) -> int:
        return len(self._actors)

    def _acquire(self):
        with self._lock:
            slot = min(range(len(self._actors)), key=lambda i: self._busy[i])
            self._busy[slot] += 1
            return slot, self._actors[slot]

    def _release(self, slot, actor, died):
        with self._lock:
            self._busy[slot] -= 1
            if died and self._actors[slot] is actor:
                try:
                    self._ray.kill(actor)
                except Exception:  # already gone
                    pass
                self._actors[slot] = self._start()
                self.restarts += 1

    def measure(self, dag_text, schedules, parallel=True):
        """One result dict per schedule, in order. A worker that dies fails the batch's candidates
        (and is replaced); an error measuring the task (it does not parse or its default schedule
        does not build) fails them with its message."""
        schedules = list(schedules)
        if not schedules:
            return []
        exceptions = self._ray.exceptions
        slot, actor = self._acquire()
        died = False
        try:
            return self._ray.get(actor.measure.remote(dag_text, schedules, bool(parallel)))
        except exceptions.RayActorError as e:
            died = True
            return _failed(len(schedules), f"ray worker died: {e}")
        except exceptions.RayTaskError as e:
            return _failed(len(schedules), f"ray worker failed: {e.cause if e.cause else e}")
        finally:
            self._release(slot, actor, died)

    def shutdown(self):
        """Stops the actors (not the Ray instance)."""
        with self._lock:
            for actor in self._actors:
                try:
                    self._ray.kill(actor)
                except Exception:
                    pass
            self._actors = []
            self._busy = []
