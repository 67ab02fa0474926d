"""Evaluates candidates in worker processes with a time limit.

An LLVM abort inside the OpenCL compiler or a kernel that never ends must not take the
caller down. A ``WorkerPool`` keeps persistent worker processes (started with ``spawn``:
pyopencl contexts do not survive ``fork``), each holding one ``Runner`` whose build cache
lasts across candidates. A worker that dies gives a ``crash`` outcome (with the signal and
the last lines it printed, e.g. ``LLVM ERROR: ...``); one that exceeds the time limit is
killed and gives ``timeout``. Either way the next candidate gets a fresh worker. A worker
killed from outside the pool (a SIGKILL the pool did not send: a user, a soak test, the
OOM killer) is not the candidate's fault: its candidate is retried once on a fresh worker
(``WorkerPool.retried``; the outcome's reason says so), and is a ``crash`` only when killed
again. A closed or replaced worker's process handle is closed at once (no descriptor is
held until garbage collection).

Inputs and the reference travel once per data set, not per candidate: the worker keeps the
last data set under a token and the pool sends it again only when the token changes.

Callables sent to a worker (``lower_fn``) must be picklable: module-level functions or
``functools.partial`` of library modules' functions. A worker does not import the
caller's main module (``spawn`` would, and a script without an
``if __name__ == "__main__":`` guard would then run again in every worker): what it
runs comes from the library, so a plain script can use a pool.
"""

from __future__ import annotations

import atexit
import hashlib
import multiprocessing as mp
import os
import pickle
import queue
import shutil
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np

from codegen.errors import InvalidArgumentError
from codegen.opencl_env import ensure_pocl_environment
from codegen.program import CompiledProgram, Outcome, Status
from ir.errors import LiftmapError

STARTUP_TIMEOUT_S = 120.0
RETRIES = 1  # a candidate whose worker was killed from outside is evaluated again this often


class WorkerStartError(LiftmapError, RuntimeError):
    """A worker could not start (it died or hung while starting)."""


class WorkerDeviceError(WorkerStartError):
    """A worker started but could not open the device: a setup error, raised to the caller."""


# ------------------------------------------------------------------ the worker process


def _last_line(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else repr(exc)


def _truncate_log(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass


def _judge(runner, kind: str, payload, inputs, reference, kw: dict,
           before_run=None, on_kernel=None) -> Outcome:
    lower_s = None
    if kind == "lower":
        t0 = time.perf_counter()
        try:
            program = payload()
        except Exception as e:  # the lowering's typed errors carry the check they fail
            lower_s = time.perf_counter() - t0
            check = getattr(e, "check", None)
            if check:
                return Outcome(Status.REJECTED, str(e), check=str(check), lower_s=lower_s)
            return Outcome(Status.CRASH, f"lowering raised {_last_line(e)}", lower_s=lower_s)
        lower_s = time.perf_counter() - t0
        if not isinstance(program, CompiledProgram):
            return Outcome(Status.CRASH, f"lower_fn returned {type(program).__name__}, "
                           "not a CompiledProgram", lower_s=lower_s)
    else:
        program = payload
    try:
        out = runner.evaluate(program, inputs, reference, before_run=before_run,
                              on_kernel=on_kernel, **kw)
    except Exception as e:
        out = Outcome(Status.CRASH, f"evaluation raised {_last_line(e)}")
    return replace(out, lower_s=lower_s) if lower_s is not None else out


ORPHAN_POLL_S = 1.0  # how often a worker checks that the process that started it lives


def _exit_when_orphaned(parent: int) -> None:
    """Ends this worker (at once, whatever it is doing: a kernel that never returns, a
    lowering that takes minutes) when the process that started it is gone, e.g. killed
    with SIGKILL, which closes no pipe while the worker is busy: no worker outlives its
    exploration."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_POLL_S)
    os._exit(3)


def _worker_main(conn, spec: str | None, log_path: str) -> None:
    """Entry point of a worker process: build a Runner, then serve requests."""
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True,
                     name="orphan-watch").start()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        from codegen.device import device_limits, device_spec
        from codegen.runner import Runner

        runner = Runner(spec)
        conn.send(("ready", {"spec": device_spec(runner.device),
                             "limits": device_limits(runner.device), "pid": os.getpid()}))
    except Exception as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    token, inputs, reference = None, None, None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        op = msg[0]
        if op == "stop":
            return
        if op == "data":
            _, token, inputs, reference = msg
            conn.send(("data-ok", token))
        elif op == "eval":
            _, want, kind, payload, kw, gated, cut = msg
            _truncate_log(fd)
            if want != token:
                conn.send(("outcome", Outcome(Status.CRASH, "worker holds no data for this token")))
                continue

            def wait_turn() -> None:  # built: ask the parent for the device, wait for it
                conn.send(("built",))
                conn.recv()

            def kernel_runs(running: bool) -> None:  # the early cut's clock: on, off
                conn.send(("kernel", running))

            conn.send(("outcome", _judge(runner, kind, payload, inputs, reference, kw,
                                         wait_turn if gated else None,
                                         kernel_runs if cut else None)))
        elif op == "ping":
            conn.send(("pong", os.getpid()))


# ------------------------------------------------------------------ the parent's side


def data_token(inputs: Mapping[str, np.ndarray], reference: np.ndarray | None) -> str:
    """A content hash of the inputs and the reference (names, shapes, dtypes, bytes)."""
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name])
        h.update(f"{name}:{a.dtype}:{a.shape};".encode())
        h.update(a.data.cast("B"))
    if reference is not None:
        r = np.ascontiguousarray(reference)
        h.update(f"ref:{r.dtype}:{r.shape};".encode())
        h.update(r.data.cast("B"))
    return h.hexdigest()


def _signal_name(code: int | None) -> str:
    if code is None:
        return "unknown exit"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _tail(path: str, n: int = 6) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = [ln.rstrip() for ln in f.read()[-8000:].splitlines() if ln.strip()]
    except OSError:
        return ""
    return "\n".join(lines[-n:])


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While a worker is spawned, the main module shows no file or spec, so the worker
    does not import it (a script without a ``__main__`` guard would run again in it)."""
    import sys

    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__")
             if main is not None and k in main.__dict__}
    try:
        for k in saved:
            setattr(main, k, None) if k == "__spec__" else delattr(main, k)
        yield
    finally:
        for k, v in saved.items():
            setattr(main, k, v)


class _Worker:
    """The parent's handle on one worker process."""

    def __init__(self, ctx, spec: str | None, log_dir: str, n: int):
        self.ctx, self.spec = ctx, spec
        self.log_path = os.path.join(log_dir, f"worker-{n}.log")
        self.proc: BaseProcess | None = None
        self.conn: Connection | None = None
        self.token: str | None = None
        self.info: dict[str, Any] = {}
        self.started = 0
        self.exit_code: int | None = None  # how the last process that died unasked ended

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    @property
    def killed_outside(self) -> bool:
        """Whether the last worker process that died was killed by a SIGKILL the pool did
        not send (the pool's own kills, on a timeout, are not deaths it sees)."""
        return self.exit_code == -signal.SIGKILL

    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        self.exit_code = None
        parent, child = self.ctx.Pipe()
        open(self.log_path, "w").close()
        proc = self.ctx.Process(
            target=_worker_main, args=(child, self.spec, self.log_path), daemon=True,
            name="liftmap-worker")
        try:
            with _main_module_hidden():
                proc.start()
        except BaseException:
            parent.close()
            child.close()
            raise
        self.proc = proc  # only a started process: kill() joins it
        child.close()
        self.conn, self.token = parent, None
        self.started += 1
        if not parent.poll(timeout_s):
            self.kill()
            raise WorkerStartError(f"worker did not start within {timeout_s:g} s")
        try:
            kind, info = parent.recv()
        except EOFError:
            proc.join(5)
            code = self.exit_code = proc.exitcode
            self.kill()
            raise WorkerStartError(f"worker died while starting ({_signal_name(code)}): "
                                   f"{_tail(self.log_path)}") from None
        if kind != "ready":
            self.kill()
            raise WorkerDeviceError(f"worker could not open the device: {info}")
        self.info = info

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.is_alive():
            proc.kill()
        if proc is not None:
            proc.join(10)
            if proc.exitcode is not None:  # its sentinel pipe is released now, not at GC
                proc.close()
                self.proc = None
        if self.conn is not None:
            self.conn.close()
        self.conn, self.token = None, None

    def stop(self) -> None:
        proc, conn = self.proc, self.conn
        if proc is not None and proc.is_alive() and conn is not None:
            try:
                conn.send(("stop",))
                proc.join(5)
            except (OSError, BrokenPipeError):
                pass
        self.kill()

    def _died(self, what: str) -> Outcome:
        proc = self.proc
        assert proc is not None  # it was started
        proc.join(5)
        code = self.exit_code = proc.exitcode
        tail = _tail(self.log_path)
        self.kill()
        reason = f"worker died {what} ({_signal_name(code)})"
        return Outcome(Status.CRASH, reason + (f": {tail}" if tail else ""))

    def call(self, kind: str, payload, inputs, reference, token: str, timeout_s: float,
             kw: dict, gate: threading.Lock | None = None,
             run_limit_s: float | None = None) -> Outcome:
        """Sends the data (if the worker lacks it) and one candidate; waits for the outcome.
        With ``gate``, the worker lowers and builds freely but runs (the timed part) only
        while holding ``gate``, which the workers of a pool share; the time spent waiting
        for it does not count against ``timeout_s``, which bounds the rest (lowering,
        build, upload, runs, comparison). ``run_limit_s`` (the early cut) limits the time
        the kernels of the first execution run on the device, and nothing else: not the
        upload, not the comparison, not PoCL's compilation at a kernel's first launch (the
        worker says when each kernel starts and ends running). A kernel slower than that is
        stopped inside its first execution (``timeout``, reason ``runs stopped after ...``).
        """
        self.exit_code = None
        if not self.alive:
            self.start()
        conn = self.conn
        assert conn is not None  # a live worker has its connection
        if self.token != token:
            try:
                conn.send(("data", token, dict(inputs), reference))
                if not conn.poll(STARTUP_TIMEOUT_S):
                    self.kill()
                    return Outcome(Status.CRASH, "worker did not acknowledge the data")
                conn.recv()
            except (EOFError, OSError):
                return self._died("while receiving the data")
            self.token = token
        t0 = time.perf_counter()
        try:
            conn.send(("eval", token, kind, payload, kw, gate is not None,
                       run_limit_s is not None))
        except (EOFError, OSError):
            return self._died("before the candidate was sent")
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            return Outcome(Status.CRASH, f"the candidate cannot be sent to a worker process: {e}; "
                           "a user function with a statement body needs a numpy meaning "
                           "that pickles (a module-level function, not a lambda)")
        left = timeout_s
        cut_left = run_limit_s  # the kernels' own time the early cut still allows
        running = False  # a kernel of the first execution runs: the cut's clock ticks
        held: threading.Lock | None = None  # the gate, while this call holds it
        cut = f"runs stopped after {run_limit_s or 0:.3g} s of kernel time in the first " \
            "execution (the run limit); worker killed and replaced"
        try:
            while True:
                t1 = time.perf_counter()
                wait_s = left if not running or cut_left is None else min(left, cut_left)
                if not conn.poll(max(0.0, wait_s)):
                    self.kill()
                    if running and cut_left is not None and cut_left <= left:
                        return Outcome(Status.TIMEOUT, cut)
                    return Outcome(Status.TIMEOUT, f"no result within {timeout_s:g} s; worker "
                                   "killed (SIGKILL) and replaced")
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    return self._died(f"after {time.perf_counter() - t0:.2f} s")
                dt = time.perf_counter() - t1
                left -= dt
                if running and cut_left is not None:
                    cut_left -= dt
                if msg[0] == "kernel":
                    running = bool(msg[1])
                    if not running and cut_left is not None and cut_left < 0:
                        self.kill()  # it ended, but past the limit (before the poll saw it)
                        return Outcome(Status.TIMEOUT, cut)
                    continue
                if msg[0] != "built":
                    return msg[1]
                if gate is not None:
                    gate.acquire()  # waiting for the device is not the candidate's time
                    held = gate
                try:
                    conn.send(("go",))
                except (EOFError, OSError):
                    return self._died("while waiting for its turn on the device")
        finally:
            if held is not None:
                held.release()


class WorkerPool:
    """Persistent worker processes that judge candidates in isolation.

    ``device`` is a spec string (``codegen.device``) or ``None`` for the default; the first
    worker resolves it and later ones reuse the same spec. ``workers`` processes run side by
    side: they lower and build in parallel, and (``serialise_runs``, the default) run their
    timed kernels one at a time, so timings stay those of a device to itself.
    ``start_method`` is ``spawn`` or ``forkserver``. Use as a context manager or call
    ``close``.
    """

    def __init__(self, device: str | None = None, *, workers: int = 1,
                 start_method: str = "spawn", default_timeout_s: float = 60.0,
                 serialise_runs: bool = True):
        if start_method not in ("spawn", "forkserver"):
            raise InvalidArgumentError("start_method must be spawn or forkserver (not fork: "
                                       "pyopencl contexts do not survive fork)")
        ensure_pocl_environment()  # inherited by the workers: shared build cache, pinned threads
        self.spec = device
        self.default_timeout_s = default_timeout_s
        self._ctx = mp.get_context(start_method)
        self._log_dir = tempfile.mkdtemp(prefix="liftmap-workers-")
        self._workers = [_Worker(self._ctx, device, self._log_dir, i) for i in range(workers)]
        self._idle: queue.Queue[_Worker] = queue.Queue()
        for w in self._workers:
            self._idle.put(w)
        self._spec_lock = threading.Lock()
        # with several workers, their timed runs take turns on the device
        self._gate = threading.Lock() if workers > 1 and serialise_runs else None
        self._memo: tuple[tuple, str, tuple] | None = None
        self.crashes = 0
        self.timeouts = 0
        self.retried = 0  # candidates evaluated again: their worker was killed from outside

    # -------------------------------------------------------------- bookkeeping

    @property
    def size(self) -> int:
        """How many worker processes the pool runs side by side."""
        return len(self._workers)

    @property
    def restarts(self) -> int:
        """How many worker processes were started in all (first starts included)."""
        return sum(w.started for w in self._workers)

    def device_info(self) -> dict[str, Any]:
        """The device spec and limits as a worker sees them (starts one if needed)."""
        w = self._idle.get()
        try:
            try:
                self._ensure(w)
            except WorkerStartError:
                if not w.killed_outside:
                    raise
                self.retried += 1  # killed from outside while starting: once more
                self._ensure(w)
            return dict(w.info)
        finally:
            self._idle.put(w)

    def _ensure(self, w: _Worker) -> None:
        if w.alive:
            return
        with self._spec_lock:
            w.spec = self.spec
            w.start()
            if self.spec is None:
                self.spec = w.info["spec"]

    def _token(self, inputs: Mapping[str, np.ndarray], reference) -> str:
        ids = tuple((k, id(v)) for k, v in sorted(inputs.items())) + (id(reference),)
        if self._memo is not None and self._memo[0] == ids:
            return self._memo[1]
        tok = data_token(inputs, reference)
        # keep the arrays alive so that their ids cannot be reused by other arrays
        self._memo = (ids, tok, (tuple(inputs.values()), reference))
        return tok

    # -------------------------------------------------------------- evaluation

    def _run(self, kind: str, payload, inputs, reference, timeout_s, kw,
             run_limit_s: float | None = None) -> Outcome:
        timeout_s = self.default_timeout_s if timeout_s is None else timeout_s
        token = self._token(inputs, reference)
        killed: list[str] = []  # the reasons of the attempts whose worker was killed
        while True:
            w = self._idle.get()
            try:
                try:
                    self._ensure(w)
                except WorkerDeviceError:
                    raise
                except WorkerStartError as e:
                    out = Outcome(Status.CRASH, str(e))
                else:
                    out = w.call(kind, payload, inputs, reference, token, timeout_s, kw,
                                 self._gate, run_limit_s)
            finally:
                self._idle.put(w)
            if out.status != "crash" or not w.killed_outside or len(killed) >= RETRIES:
                break
            killed.append(out.reason)  # not the candidate's doing: once more, fresh worker
            self.retried += 1
        if killed:
            note = f"retried {len(killed)} time(s): its worker was killed from outside " \
                   f"the pool ({'; '.join(killed)})"
            out = replace(out, reason=f"{out.reason}; {note}" if out.reason else note)
        if out.status == "timeout":
            self.timeouts += 1
        elif out.status == "crash" and not w.alive:
            self.crashes += 1
        return out

    def evaluate(self, program: CompiledProgram, inputs: Mapping[str, np.ndarray],
                 reference: np.ndarray | None = None, *, timeout_s: float | None = None,
                 **kw: Any) -> Outcome:
        """``Runner.evaluate`` in a worker; ``kw`` goes to it (rtol, atol, repeats, flops...)."""
        return self._run("program", program, inputs, reference, timeout_s, kw)

    def evaluate_candidate(self, lower_fn: Callable[[], CompiledProgram],
                           inputs: Mapping[str, np.ndarray],
                           reference: np.ndarray | None = None, *,
                           timeout_s: float | None = None, run_limit_s: float | None = None,
                           **kw: Any) -> Outcome:
        """Lowers (``lower_fn()``) and evaluates in a worker: an exception with a ``check``
        attribute becomes ``rejected:<check>``, any other exception or a dead worker
        ``crash``; ``lower_s`` is set. The time limit covers lowering and evaluation;
        ``run_limit_s``, if given, replaces it once the candidate is built (see
        ``_Worker.call``)."""
        return self._run("lower", lower_fn, inputs, reference, timeout_s, kw, run_limit_s)

    def map_candidates(self, lower_fns: Iterable[Callable[[], CompiledProgram]],
                       inputs: Mapping[str, np.ndarray], reference: np.ndarray | None = None,
                       *, timeout_s: float | None = None, **kw: Any) -> list[Outcome]:
        """``evaluate_candidate`` for each, spread over the pool's workers, in order."""
        fns = list(lower_fns)
        if len(self._workers) == 1:
            return [self.evaluate_candidate(f, inputs, reference, timeout_s=timeout_s, **kw)
                    for f in fns]
        with ThreadPoolExecutor(len(self._workers)) as ex:
            return list(ex.map(lambda f: self.evaluate_candidate(
                f, inputs, reference, timeout_s=timeout_s, **kw), fns))

    def close(self) -> None:
        """Stops every worker and removes their logs."""
        for w in self._workers:
            w.stop()
        shutil.rmtree(self._log_dir, ignore_errors=True)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_default_pool: WorkerPool | None = None


def default_pool() -> WorkerPool:
    """A process-wide pool on the default device (closed at exit)."""
    global _default_pool
    if _default_pool is None:
        _default_pool = WorkerPool()
        atexit.register(_default_pool.close)
    return _default_pool


def evaluate_isolated(program: CompiledProgram, inputs: Mapping[str, np.ndarray],
                      reference: np.ndarray | None = None, *, timeout_s: float = 60.0,
                      pool: WorkerPool | None = None, **kw: Any) -> Outcome:
    """Judges ``program`` in a worker process of ``pool`` (default: ``default_pool()``)."""
    return (pool or default_pool()).evaluate(program, inputs, reference,
                                             timeout_s=timeout_s, **kw)


def evaluate_candidate(lower_fn: Callable[[], CompiledProgram],
                       inputs: Mapping[str, np.ndarray], reference: np.ndarray | None = None,
                       *, timeout_s: float = 60.0, pool: WorkerPool | None = None,
                       **kw: Any) -> Outcome:
    """Lowers with ``lower_fn`` and judges the result, both inside a worker process."""
    return (pool or default_pool()).evaluate_candidate(lower_fn, inputs, reference,
                                                       timeout_s=timeout_s, **kw)
