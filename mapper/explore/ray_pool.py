"""Evaluating candidates on a Ray cluster: one actor per device, the store on the driver.

``RayPool`` has the interface of ``codegen.worker.WorkerPool`` that the evaluator uses
(``size``, ``device_info``, ``evaluate_candidate``, ``close``), so
``explore(..., pool=RayPool(...))`` runs unchanged: the driver draws candidates, keeps one
in flight per actor and writes every result to its store; each actor owns a ``WorkerPool``
on its device (a crashing or hanging kernel still costs a worker process, not the actor).
Ray is an optional extra (``pip install liftmap[cluster]``); it is the engine Kernel Tuner
chose for multi-GPU tuning, and it brings the scheduling, the object store and the
networking this would otherwise write by hand.

    import ray
    ray.init(address="auto")                      # or ray.init() for a local cluster
    with RayPool(devices=["NVIDIA:0", "NVIDIA:1"]) as pool:
        explore(task, strategy="model", budget="1h", store="results/x.sqlite", pool=pool)
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ir.errors import LiftmapError


class RayUnavailableError(LiftmapError, RuntimeError):
    """Ray is not installed or cannot start."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailableError("the Ray evaluator needs Ray: pip install 'liftmap[cluster]'"
                                  ) from None
    return ray


class _DeviceActor:
    """Runs on a Ray worker: a WorkerPool on one device."""

    def __init__(self, device: str | None, timeout_s: float):
        from codegen.worker import WorkerPool

        self.pool = WorkerPool(device, default_timeout_s=timeout_s)

    def device_info(self) -> dict[str, Any]:
        return self.pool.device_info()

    def evaluate_candidate(self, lower_fn, inputs, reference, timeout_s, kw):
        return self.pool.evaluate_candidate(lower_fn, inputs, reference, timeout_s=timeout_s,
                                            **kw)

    def close(self) -> None:
        self.pool.close()


class RayPool:
    """``devices``: one OpenCL device spec per actor (``None``: each node's default); the
    actors must all see the same kind of device (the store keys results by one device).
    Ray must be initialised (``ray.init``) before, or ``address`` is given."""

    def __init__(self, devices: Sequence[str | None] = (None,), *,
                 address: str | None = None, timeout_s: float = 60.0,
                 num_cpus_per_actor: float = 1.0):
        ray = _ray()
        if not devices:
            raise ValueError("RayPool needs at least one device")
        try:
            if not ray.is_initialized():
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        except Exception as e:  # Ray reports start-up problems with many exception types
            raise RayUnavailableError(f"Ray could not start: {e}") from None
        self._ray = ray
        cls = ray.remote(num_cpus=num_cpus_per_actor)(_DeviceActor)
        self._actors = [cls.remote(d, timeout_s) for d in devices]
        self._idle: queue.Queue = queue.Queue()
        for a in self._actors:
            self._idle.put(a)
        infos = ray.get([a.device_info.remote() for a in self._actors])
        names = {i.get("limits", {}).get("name") for i in infos}
        if len(names) > 1:
            self.close()
            raise ValueError(f"the actors see different devices ({', '.join(map(str, names))})"
                             ": one store holds the results of one kind of device")
        self._info = infos[0]
        # ((id(inputs), id(reference)), (inputs' ref, reference's ref, the objects kept alive))
        self._refs: tuple[tuple[int, int], tuple[Any, Any, Any]] | None = None

    @property
    def size(self) -> int:
        """How many candidates can be in flight (one per actor)."""
        return len(self._actors)

    def device_info(self) -> dict[str, Any]:
        """The device spec and limits as the first actor's worker sees them."""
        return dict(self._info)

    def _data(self, inputs: Mapping[str, Any], reference: Any):
        """The inputs and reference in Ray's object store (put once per data set)."""
        key = id(inputs), id(reference)
        if self._refs is None or self._refs[0] != key:
            self._refs = (key, (self._ray.put(dict(inputs)), self._ray.put(reference),
                                (inputs, reference)))
        return self._refs[1][0], self._refs[1][1]

    def evaluate_candidate(self, lower_fn: Callable, inputs: Mapping[str, Any],
                           reference: Any = None, *, timeout_s: float | None = None,
                           **kw: Any):
        """Lowers and evaluates on an idle actor's device (blocks until one is idle)."""
        data, ref = self._data(inputs, reference)
        actor = self._idle.get()
        try:
            return self._ray.get(actor.evaluate_candidate.remote(lower_fn, data, ref,
                                                                 timeout_s, kw))
        finally:
            self._idle.put(actor)

    def close(self) -> None:
        """Stops the actors' worker pools and the actors."""
        for a in self._actors:
            try:
                self._ray.get(a.close.remote(), timeout=30)
            except Exception:  # an actor that already died has nothing to close
                pass
            self._ray.kill(a)
        self._actors = []

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
