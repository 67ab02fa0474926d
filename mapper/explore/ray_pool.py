"""Evaluating candidates on a Ray cluster: one device actor per node and device, the store
on the driver.

``RayPool`` has the interface of ``codegen.worker.WorkerPool`` that the evaluator uses
(``size``, ``device_info``, ``evaluate_candidate``, ``close``), so ``explore`` runs
unchanged over it (``explore(..., ray=ADDRESS)``, ``explore(..., pool=RayPool(...))``,
``mapper explore ... --ray [ADDRESS]``):

* **The split.** Every alive node with CPUs gets one actor per device spec, pinned to it
  (a hard node affinity: an actor is never moved to another node, so a device has exactly
  one actor). The actor owns a ``WorkerPool`` of as many worker processes as its share of
  the node's CPUs: they lower and build in parallel, and their timed runs take turns on the
  device (the pool's gate), so no two timed kernels ever share a device. The pool's
  ``size`` is the sum of the actors' worker processes: that many candidates are in
  flight, each on the least-loaded actor, and each result comes back as soon as it is done.
* **The store** is written by the driver only (the evaluator's caller): actors return
  ``Outcome``s, nothing else.
* **Faults.** A candidate whose actor dies (its process killed, its node lost) is retried
  once on another actor (on the same one after Ray restarted it, where no other is left);
  lost again, it is the outcome ``lost``, recorded once like any other. A dead actor is
  probed until Ray has restarted it (``revive_s``), then used again; past that it is given
  up, and when every actor is given up the run stops with ``RayClusterError`` (the store
  holds every result so far and resumes). A kernel that kills its worker process is the
  candidate's ``crash``, as with local workers (the actor survives it).
* **The backend.** What an actor evaluates with is built on it by ``backend`` (default
  ``worker_pool``: a ``WorkerPool`` on the node's OpenCL device). A simulated device
  (``mapper.explore.simulate.SimulatedDevice.backend(store)``) replays a store's measured
  times instead: ``experiments/bench_ray_scaling.py`` measures the driver with it.
* **One device.** The store keys results by the device: nodes whose device differs from
  the others are refused (``DeviceMismatchError``), or left out with ``mismatch="exclude"``
  (the largest group of identical devices is kept; ``excluded`` says which were not).

Ray is an optional extra (``pip install 'liftmap[cluster]'``); it is the engine Kernel
Tuner chose for multi-GPU tuning, and brings the scheduling, the object store (inputs and
the reference travel once per node) and the networking.

    with RayPool(address="auto") as pool:        # the cluster `ray start` runs here
        explore(task, budget="1h", store="results/x.sqlite", pool=pool)
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codegen.program import Outcome, Status
from ir.errors import LiftmapError

ACTOR_RESTARTS = 3  # Ray restarts a dead actor on its node this often, then gives it up
RETRIES = 1  # a candidate whose actor died is tried this many more times, then it is lost
# Ray hides the GPUs of an actor that asks for none (CUDA_VISIBLE_DEVICES="": by default up
# to its 2026 versions, and with RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1 since): the actors
# choose their OpenCL device themselves, so they take back the node's view of its devices
_DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")


class RayUnavailableError(LiftmapError, RuntimeError):
    """Ray is not installed, or cannot start or reach the cluster."""


class RayClusterError(LiftmapError, RuntimeError):
    """The cluster cannot evaluate: no node has a CPU, a device actor cannot start, or
    every device actor was lost."""


class RayPoolArgumentError(LiftmapError, ValueError):
    """An argument of ``RayPool`` is out of its range (the message says which)."""


class DeviceMismatchError(RayClusterError, ValueError):
    """The nodes see different devices (or some cannot open theirs): one store holds the
    results of one device."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailableError("the Ray evaluator needs Ray: pip install 'liftmap[cluster]' "
                                  "(or pip install 'ray>=2.30') on the driver and every node"
                                  ) from None
    return ray


def ray_available() -> str | None:
    """``None`` where Ray can be imported, else why not (in words)."""
    try:
        _ray()
    except RayUnavailableError as e:
        return str(e)
    return None


# ------------------------------------------------------------------ the actor (on a node)


def _start_environ() -> dict[str, str] | None:
    """The environment this process started with (what the raylet gave it, before Ray
    changed anything in ``os.environ``); ``None`` where the system does not show it."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {k: v for k, _, v in pairs}


def _keep_node_devices() -> None:
    """Gives this actor process (and the worker processes it starts, which inherit its
    environment) back the visible-device variables of its node, as set where ``ray start``
    ran there, where Ray emptied them, and stops Ray from setting them again. Done here,
    not with a ``runtime_env``: an actor with environment variables of its own cannot use
    the worker processes a node keeps started, and starts seconds later. Where the start
    environment cannot be read (no ``/proc``: not Linux), the variables stay as Ray set
    them."""
    for v in _DEVICE_VARS:
        os.environ[f"RAY_EXPERIMENTAL_NOSET_{v}"] = "1"
    start = _start_environ()
    if start is None:
        return
    for v in _DEVICE_VARS:
        if v in start:
            os.environ[v] = start[v]
        else:
            os.environ.pop(v, None)


def worker_pool(*, spec: str | None, workers: int, timeout_s: float) -> Any:
    """The default backend of a device actor: a ``WorkerPool`` of ``workers`` processes on
    the node's OpenCL device ``spec``."""
    from codegen.worker import WorkerPool

    return WorkerPool(spec, workers=workers, default_timeout_s=timeout_s)


class _DeviceActor:
    """Runs on a node: the pool ``backend`` builds there (a ``WorkerPool`` of ``workers``
    processes on one device, by default)."""

    def __init__(self, spec: str | None, workers: int, timeout_s: float,
                 backend: Callable[..., Any] = worker_pool):
        _keep_node_devices()
        self.pool = backend(spec=spec, workers=workers, timeout_s=timeout_s)
        self._lock = threading.Lock()
        self._data_key: str | None = None
        self._data: tuple[Any, Any] = ({}, None)

    def info(self) -> dict[str, Any]:
        """Where the actor runs and what its device is (starts one worker process)."""
        import ray

        return {**self.pool.device_info(), "node_id": ray.get_runtime_context().get_node_id(),
                "ip": ray.util.get_node_ip_address(), "host": socket.gethostname(),
                "actor_pid": os.getpid(), "workers": self.pool.size}

    def ping(self) -> int:
        return os.getpid()

    def _dataset(self, ref: Any) -> tuple[Any, Any]:
        """The inputs and reference of ``ref`` (fetched once per data set)."""
        import ray

        with self._lock:
            if self._data_key != ref.hex():
                self._data, self._data_key = ray.get(ref), ref.hex()
            return self._data

    def evaluate(self, box: list, lower_fn: Callable, timeout_s: float | None,
                 kw: dict[str, Any]) -> Outcome:
        inputs, reference = self._dataset(box[0])
        return self.pool.evaluate_candidate(lower_fn, inputs, reference, timeout_s=timeout_s,
                                            **kw)

    def close(self) -> None:
        self.pool.close()


# ------------------------------------------------------------------ the driver's side


@dataclass
class ActorInfo:
    """One device actor as the driver sees it."""

    index: int
    node_id: str
    ip: str
    host: str
    spec: str | None  # the spec asked for (None: the node's default device)
    workers: int = 0  # worker processes (candidates in flight on it)
    pid: int = 0  # the actor's process (changes when Ray restarts it)
    device: dict[str, Any] = field(default_factory=dict)  # its device description
    info: dict[str, Any] = field(default_factory=dict)  # WorkerPool.device_info()
    state: str = "up"  # up | down (Ray restarts it) | gone
    busy: int = 0
    failures: int = 0
    last_error: str = ""  # why it failed last, in words

    @property
    def where(self) -> str:
        return f"node {self.ip} ({self.node_id[:8]})" + (f" device {self.spec!r}"
                                                          if self.spec else "")


@dataclass
class _Slot:
    actor: ActorInfo
    handle: Any


def _devices(device: str | None | Sequence[str | None]) -> list[str | None]:
    if device is None or isinstance(device, str):
        return [device]
    out = list(device)
    if not out:
        raise RayPoolArgumentError("RayPool needs at least one device spec (None: each "
                                   "node's default device)")
    return out


def _cpu_share(cpus: float, n: int) -> float:
    """The CPUs each of ``n`` actors on a node of ``cpus`` reserves (Ray takes whole
    numbers above one)."""
    share = cpus / n
    return float(int(share)) if share >= 1 else round(share, 4)


class RayPool:
    """Device actors on every node of a Ray cluster (see the module docstring).

    ``device``: an OpenCL device spec applied on every node, or several (one actor per
    spec per node: the GPUs of a multi-GPU node), ``None`` for each node's default.
    ``address``: the cluster to join (``"auto"``: the one ``ray start`` runs on this
    machine; ``"host:port"``; ``None`` or ``"local"``: start a local cluster on this
    machine), used only where Ray is not initialised yet (a local cluster started here is
    shut down by ``close``). ``workers_per_device``: worker processes per actor (default:
    the node's CPUs shared among its actors). ``timeout_s``: the default limit of one
    candidate. ``mismatch``: ``"refuse"`` (raise ``DeviceMismatchError`` when the nodes'
    devices differ or some cannot open theirs) or ``"exclude"`` (keep the largest group of
    identical devices). ``revive_s``: how long a dead actor is waited for. ``nodes``: the
    node ids to use (default every alive node with a CPU). ``backend``: what each actor
    evaluates with, a picklable ``(spec=, workers=, timeout_s=)`` -> pool with
    ``WorkerPool``'s interface, built on the actor (default ``worker_pool``: the node's
    OpenCL device; ``mapper.explore.simulate.SimulatedDevice.backend(store)``: a simulated
    device replaying a store's times, for scaling studies).
    """

    def __init__(self, device: str | None | Sequence[str | None] = None, *,
                 address: str | None = None, workers_per_device: int | None = None,
                 timeout_s: float = 60.0, mismatch: str = "refuse",
                 start_timeout_s: float = 120.0, revive_s: float = 60.0,
                 nodes: Sequence[str] | None = None,
                 backend: Callable[..., Any] = worker_pool):
        # an address where nothing answers is said at once, before Ray is imported (a
        # second); where Ray was imported, it may be initialised already (address unused)
        checked = address not in (None, "local", "auto") and "ray" not in sys.modules \
            and importlib.util.find_spec("ray") is not None
        if checked:
            _check_reachable(None, str(address))
        ray = _ray()
        if mismatch not in ("refuse", "exclude"):
            raise RayPoolArgumentError(f"mismatch must be 'refuse' or 'exclude', not "
                                       f"{mismatch!r}")
        if workers_per_device is not None and workers_per_device < 1:
            raise RayPoolArgumentError(f"workers_per_device must be at least 1, not "
                                       f"{workers_per_device}")
        specs = _devices(device)
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            local = address in (None, "local")
            if not local and not checked:
                _check_reachable(ray, str(address))
            try:
                ray.init(address="local" if local else address, log_to_driver=False,
                         logging_level=logging.ERROR,
                         **({"include_dashboard": False} if local else {}))
            except Exception as e:  # noqa: BLE001 - Ray reports start-up with many types
                where = "start a local Ray cluster" if local else f"join the Ray cluster at " \
                    f"{address!r} (is `ray start --head` running there, same Ray version?)"
                raise RayUnavailableError(f"could not {where}: {type(e).__name__}: {e}"
                                          ) from None
            self._started = True
        self.revive_s = revive_s
        self.retried = 0  # candidates sent again after their actor died
        self.lost = 0  # candidates lost twice (outcome lost)
        self.excluded: list[str] = []  # actors left out (mismatch="exclude"), in words
        self.incidents: list[str] = []  # every actor failure and revival, in words
        self._cond = threading.Condition()
        self._closed = False
        self._refs: tuple[tuple[int, int], Any, Any] | None = None
        self._pinned: _Slot | None = None
        try:
            self._slots = self._start(specs, workers_per_device, timeout_s, mismatch,
                                      start_timeout_s, nodes, backend)
        except BaseException:
            self._shutdown()
            raise
        self._size = sum(s.actor.workers for s in self._slots)
        self._info = dict(self._slots[0].actor.info)

    # -------------------------------------------------------------- start-up

    def _start(self, specs: list[str | None], workers: int | None, timeout_s: float,
               mismatch: str, start_timeout_s: float, only: Sequence[str] | None,
               backend: Callable[..., Any]) -> list[_Slot]:
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from mapper.explore.store import device_description

        nodes = [n for n in ray.nodes() if n.get("Alive")
                 and n.get("Resources", {}).get("CPU", 0) > 0
                 and (only is None or n["NodeID"] in only)]
        if not nodes:
            raise RayClusterError("the Ray cluster has no alive node with a CPU: start one "
                                  "with `ray start --address HEAD:6379` (a node started "
                                  "with --num-cpus=0 gets no device actor)")
        remote = ray.remote(_DeviceActor)
        slots: list[_Slot] = []
        for node in nodes:
            cpus = float(node["Resources"]["CPU"])
            share = _cpu_share(cpus, len(specs))
            n = workers or max(1, int(cpus // len(specs)))
            for spec in specs:
                handle = remote.options(
                    num_cpus=min(share, float(n)), max_restarts=ACTOR_RESTARTS,
                    max_task_retries=0, max_concurrency=n + 2,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"],
                                                                       soft=False),
                ).remote(spec, n, timeout_s, backend)
                info = ActorInfo(len(slots), node["NodeID"],
                                 str(node.get("NodeManagerAddress", "?")),
                                 str(node.get("NodeManagerHostname", "?")), spec, n)
                slots.append(_Slot(info, handle))
        refs = [s.handle.info.remote() for s in slots]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=start_timeout_s)
        done = set(ready)
        problems: list[tuple[_Slot, str]] = []
        groups: dict[str, list[_Slot]] = {}
        vanished: list[_Slot] = []  # nodes that died between the listing and the placement
        for s, ref in zip(slots, refs):
            if ref not in done:
                problems.append((s, f"its device actor did not start within "
                                    f"{start_timeout_s:g} s (no free CPU on the node? "
                                    "another job may hold them)"))
                continue
            try:
                got = ray.get(ref)
            except ray.exceptions.RayError as e:
                cause = getattr(e, "cause", None) or e
                if _node_gone(ray, e) or _node_gone(ray, cause):
                    vanished.append(s)
                    continue
                last = (str(cause).strip().splitlines() or ["?"])[-1][:300]
                problems.append((s, f"its device actor failed: {type(cause).__name__}: "
                                    f"{last} (is liftmap installed in the same Python on "
                                    "every node, with an OpenCL device?)"))
                continue
            a = s.actor
            a.pid, a.workers = int(got["actor_pid"]), int(got["workers"])
            a.info = {k: got[k] for k in ("spec", "limits", "pid") if k in got}
            a.device = device_description(dict(got.get("limits", {})))
            groups.setdefault(json.dumps(a.device, sort_keys=True), []).append(s)
        self._kill(vanished)
        self.excluded = [f"{s.actor.where}: the node is gone" for s in vanished]
        if not groups and not problems:
            raise RayClusterError("every node of the Ray cluster was lost while the device "
                                  "actors started: check the cluster (ray status)")
        if groups and (problems or len(groups) > 1) and mismatch == "exclude":
            keep = max(groups.values(), key=lambda g: (len(g), -g[0].actor.index))
            for g in groups.values():
                if g is not keep:
                    problems += [(s, f"its device differs ({_device_words(s.actor.device)}"
                                     f", not {_device_words(keep[0].actor.device)})")
                                 for s in g]
            self.excluded += [f"{s.actor.where}: {why}" for s, why in problems]
            self._kill([s for s, _ in problems])
            return keep
        if problems or len(groups) > 1:
            lines = [f"{s.actor.where}: {why}" for s, why in problems]
            if len(groups) > 1:
                lines += [f"{', '.join(s.actor.where for s in g)}: {_device_words(d)}"
                          for d, g in ((json.loads(k), g) for k, g in groups.items())]
            self._kill(slots)
            cls = DeviceMismatchError if groups else RayClusterError
            raise cls("the nodes cannot all evaluate on one device:\n  " + "\n  ".join(lines)
                      + "\nchoose the same device on every node (--device SPEC, a platform "
                      "substring), leave the other nodes out of the cluster, or keep the "
                      "largest group of identical devices (RayPool(mismatch='exclude'))")
        return next(iter(groups.values()))

    def _kill(self, slots: Sequence[_Slot]) -> None:
        for s in slots:
            try:
                self._ray.kill(s.handle)
            except Exception:  # noqa: BLE001 - an actor that never started has nothing left
                pass

    # -------------------------------------------------------------- bookkeeping

    @property
    def size(self) -> int:
        """How many candidates can be in flight (the actors' worker processes in all)."""
        return self._size

    @property
    def actors(self) -> list[ActorInfo]:
        """The device actors in use (state, node, process, load)."""
        return [s.actor for s in self._slots]

    def device_info(self) -> dict[str, Any]:
        """The device spec and limits as the first actor's worker sees them (every actor
        in use sees the same device)."""
        return dict(self._info)

    def describe(self) -> str:
        """One line: actors, worker processes, nodes, device (and who was left out)."""
        nodes = {s.actor.node_id for s in self._slots}
        name = self._info.get("limits", {}).get("name", "?")
        text = (f"Ray: {len(self._slots)} device actor(s) with {self._size} worker "
                f"process(es) on {len(nodes)} node(s), device {name}")
        if self.excluded:
            text += f"; left out: {'; '.join(self.excluded)}"
        return text

    def _data(self, inputs: Mapping[str, Any], reference: Any) -> Any:
        """The inputs and reference in Ray's object store (put once per data set)."""
        key = id(inputs), id(reference)
        with self._cond:
            if self._refs is None or self._refs[0] != key:
                self._refs = (key, self._ray.put((dict(inputs), reference)),
                              (inputs, reference))  # kept alive: their ids stay theirs
            return self._refs[1]

    # -------------------------------------------------------------- scheduling

    def _acquire(self, tried: Sequence[_Slot], pinned: bool = False) -> _Slot | None:
        """A free worker slot on an actor that is up, preferring actors not in ``tried``
        (waits for one); ``None`` when no actor is left."""
        with self._cond:
            while True:
                if self._closed:
                    raise RayClusterError("the Ray pool was closed")
                live = [s for s in self._slots if s.actor.state != "gone"]
                if not live:
                    return None
                fresh = [s for s in live if s not in tried]
                pool = fresh or live  # only tried actors left: one of them, restarted
                if pinned:
                    if self._pinned is None or self._pinned not in pool:
                        up = [s for s in pool if s.actor.state == "up"]
                        self._pinned = up[0] if up else None
                    pool = [self._pinned] if self._pinned is not None else []
                free = [s for s in pool if s.actor.state == "up"
                        and s.actor.busy < s.actor.workers]
                if free:
                    s = min(free, key=lambda s: (s.actor.busy / s.actor.workers,
                                                 s.actor.index))
                    s.actor.busy += 1
                    return s
                self._cond.wait(1.0)

    def _release(self, slot: _Slot) -> None:
        with self._cond:
            slot.actor.busy -= 1
            self._cond.notify_all()

    def _submit(self, slot: _Slot, lower_fn: Callable, data: Any, timeout_s: float | None,
                kw: dict[str, Any]) -> Any:
        """Sends one candidate to ``slot``'s actor; its result's reference."""
        return slot.handle.evaluate.remote([data], lower_fn, timeout_s, kw)

    def _failed(self, slot: _Slot, err: BaseException) -> None:
        """``slot``'s actor died or is unreachable: out of use until Ray restarted it."""
        with self._cond:
            slot.actor.failures += 1
            slot.actor.last_error = f"{type(err).__name__}: {str(err).strip()[:300]}"
            self.incidents.append(f"{time.strftime('%H:%M:%S')} {slot.actor.where} failed: "
                                  f"{slot.actor.last_error}")
            if slot.actor.state != "up":
                return
            slot.actor.state = "down"
            self._cond.notify_all()
        threading.Thread(target=self._revive, args=(slot,), daemon=True,
                         name="liftmap-ray-revive").start()

    def _revive(self, slot: _Slot) -> None:
        """Waits (up to ``revive_s``) for Ray to restart ``slot``'s actor, then puts it back
        in use; gives it up when Ray reports it dead for good or the time is up."""
        ray = self._ray
        deadline = time.monotonic() + self.revive_s
        state = "gone"
        while not self._closed and time.monotonic() < deadline:
            try:
                slot.actor.pid = ray.get(slot.handle.ping.remote(),
                                         timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                state = "up"
                break
            except ray.exceptions.GetTimeoutError:
                continue
            except ray.exceptions.RayError:
                if _actor_state(ray, slot.handle) == "DEAD":
                    break
                time.sleep(0.5)
        with self._cond:
            slot.actor.state = state
            if not self._closed:
                self.incidents.append(f"{time.strftime('%H:%M:%S')} {slot.actor.where} "
                                      + ("is back" if state == "up" else "given up"))
            self._cond.notify_all()

    # -------------------------------------------------------------- evaluation

    def evaluate_candidate(self, lower_fn: Callable, inputs: Mapping[str, Any],
                           reference: Any = None, *, timeout_s: float | None = None,
                           **kw: Any) -> Outcome:
        """Lowers and evaluates on the least-loaded actor (blocks until one has a free
        worker); ``kw`` goes to ``WorkerPool.evaluate_candidate``. An actor that dies
        meanwhile costs a retry on another one, then the outcome ``lost``."""
        return self._evaluate(lower_fn, inputs, reference, timeout_s, kw, pinned=False)

    def evaluate_pinned(self, lower_fn: Callable, inputs: Mapping[str, Any],
                        reference: Any = None, *, timeout_s: float | None = None,
                        **kw: Any) -> Outcome:
        """``evaluate_candidate`` on one device for every call (the re-timing of the
        winners compares their times on one device, not across nodes)."""
        return self._evaluate(lower_fn, inputs, reference, timeout_s, kw, pinned=True)

    def _evaluate(self, lower_fn: Callable, inputs: Mapping[str, Any], reference: Any,
                  timeout_s: float | None, kw: dict[str, Any], pinned: bool) -> Outcome:
        ray = self._ray
        data = self._data(inputs, reference)
        tried: list[_Slot] = []
        why: list[str] = []
        for attempt in range(RETRIES + 1):
            slot = self._acquire(tried, pinned)
            if slot is None:
                if attempt == 0:
                    lost = "; ".join(f"{s.actor.where}: {s.actor.failures} failure(s), last "
                                     f"{s.actor.last_error or '?'}" for s in self._slots)
                    raise RayClusterError(
                        f"every device actor of the Ray cluster was lost ({lost}); the store "
                        "keeps every result so far: run the same command again (with --ray "
                        "or without) to resume")
                break
            if attempt:
                with self._cond:
                    self.retried += 1
            try:
                return ray.get(self._submit(slot, lower_fn, data, timeout_s, kw))
            except ray.exceptions.RayTaskError as e:  # raised inside the actor's method
                cause = getattr(e, "cause", None)
                if isinstance(cause, LiftmapError):
                    raise cause from None  # a setup error (the device cannot be opened)
                raise
            except ray.exceptions.RayError as e:  # the actor, its node or the data was lost
                tried.append(slot)
                why.append(f"{slot.actor.where}: {type(e).__name__}")
                self._failed(slot, e)
            finally:
                self._release(slot)
        with self._cond:
            self.lost += 1
        return Outcome(Status.LOST, "its device actor was lost in flight, "
                       f"{len(why)} time(s): " + "; ".join(why) + " (not the candidate's "
                       "fault: a node or actor died)")

    # -------------------------------------------------------------- closing

    def close(self) -> None:
        """Stops the actors' worker pools and the actors (and a local cluster started
        here)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        ray = self._ray
        slots = getattr(self, "_slots", [])
        refs = []
        for s in slots:
            if s.actor.state != "gone":
                try:
                    refs.append(s.handle.close.remote())
                except Exception:  # noqa: BLE001 - a dead actor has nothing to close
                    pass
        if refs:
            try:
                ray.wait(refs, num_returns=len(refs), timeout=30)
            except Exception:  # noqa: BLE001 - closing what is left regardless
                pass
        self._kill(slots)
        self._slots = []
        self._shutdown()

    def _shutdown(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _device_words(d: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items() if k in ("name", "platform_version",
                                                                 "max_compute_units"))


def _check_reachable(ray: Any, address: str, timeout_s: float = 10.0) -> None:
    """Raises ``RayUnavailableError`` at once where nothing answers at the cluster's
    address (Ray itself retries for many minutes). ``auto`` is the address ``ray start``
    recorded on this machine; an address of another form is left to Ray."""
    if address == "auto":
        try:
            found = ray._private.services.get_ray_address_from_environment("auto", None)
        except Exception:  # noqa: BLE001 - a private API, or no cluster recorded: Ray says
            return
        if not found or found == "auto":
            return
        address = str(found)
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise RayUnavailableError(
            f"nothing answers at the Ray cluster address {address} ({e.strerror or e}): "
            f"start the head there first (ray start --head --port {port}) or give its "
            "address as `ray start` printed it") from None


def _node_gone(ray: Any, err: BaseException) -> bool:
    """Whether ``err`` says an actor's node no longer exists (it died after the listing)."""
    unschedulable = getattr(ray.exceptions, "ActorUnschedulableError", None)
    return (unschedulable is not None and isinstance(err, unschedulable)) or \
        isinstance(err, getattr(ray.exceptions, "NodeDiedError", ()))


def _actor_state(ray: Any, handle: Any) -> str | None:
    """Ray's state of an actor (ALIVE, RESTARTING, DEAD, ...), ``None`` where unknown."""
    try:
        return ray._private.state.actors(handle._actor_id.hex()).get("State")
    except Exception:  # noqa: BLE001 - a private API: unknown, then the revive time decides
        return None
