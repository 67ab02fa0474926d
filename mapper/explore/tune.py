"""Tune your own OpenCL kernel, as ``kernel_tuner.tune_kernel`` does, with liftmap's search.

:func:`tune_kernel` takes what Kernel Tuner's ``tune_kernel`` takes (a kernel's name and
source, the problem size, its arguments, the tuning parameters and their restrictions, the
expected ``answer``) and searches the configurations with liftmap's machinery:

* the space is a :class:`constraints.space.SearchSpace` (restrictions as Kernel Tuner
  writes them, and its implicit ``block_size_x * block_size_y * block_size_z`` limit at the
  device's maximum work-group size);
* a strategy of ``mapper.explore.strategies`` proposes configurations (``model`` by
  default; ``solver`` draws uniformly, as Kernel Tuner's ``random_sample``);
* each configuration is built and run in a worker process (``codegen.worker``), so a
  kernel that fails to compile, crashes the process or hangs is an outcome
  (``compile-error``, ``crash``, ``timeout``), never an exception of the tuner; a launch
  the device refuses is ``rejected``, an output that differs from ``answer`` is
  ``wrong-result``;
* every candidate is a :class:`mapper.explore.record.Record` in a results store (``store=``
  a path keeps them: a later call resumes, ``mapper results STORE`` shows them, ``mapper
  results STORE --format kernel-tuner`` writes a Kernel Tuner cache).

As in Kernel Tuner, every tuning parameter, ``block_size_x/y/z`` (256, 1, 1 when not
tuned), ``grid_size_x/y/z`` and ``kernel_tuner`` are defined for the compiler, here as
``-Dname=value`` build options (a boolean is defined as 1 or 0); the work-groups are
``block_size_x/y/z`` work-items and the grid is the problem size divided by ``grid_div_x/y/z``
(default: the block sizes), rounded up. The records' tuning values are ints; a parameter
with other values (strings, floats, booleans) is recorded by the position of its value
(``mapper.explore.interop.decode_tuning``, :meth:`TuneResult.configs`).

Arrays are ``float32`` or ``int32`` numpy arrays (liftmap's runner allocates those),
scalars numpy or Python ints and floats; ``answer`` is a list as long as ``arguments``
with the expected content of one output argument and ``None`` elsewhere, compared as
``numpy.allclose(result, expected, atol=atol)`` compares.

The command line form is ``mapper tune KERNEL.cl`` (``mapper.cli.tune``).
"""

from __future__ import annotations

import ast
import functools
import json
import math
import operator
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codegen.program import Buffer, CompiledProgram, Kernel
from constraints.space import SearchSpace
from ir.errors import LiftmapError
from mapper.encoding import MapCodes
from mapper.explore.interop import (
    TUNE_PARAMS_META,
    KernelOnly,
    decode_tuning,
    encode_config,
    is_categorical,
)
from mapper.explore.record import Record
from mapper.explore.run import Results
from mapper.explore.store import Context, ResultStore
from mapper.explore.task import Task

__all__ = ["TuneError", "TuneResult", "KernelSpec", "KernelTask", "KernelSpace",
           "tune_kernel", "kernel_program", "launch_sizes", "eval_size", "define_value"]

BLOCK_SIZE_NAMES = ("block_size_x", "block_size_y", "block_size_z")
DEFAULT_BLOCK = (256, 1, 1)  # Kernel Tuner's thread block when a size is not tuned
GRID_NAMES = ("grid_size_x", "grid_size_y", "grid_size_z")
DTYPE_NAMES = {np.dtype(np.float32): "float", np.dtype(np.int32): "int"}


class TuneError(LiftmapError, ValueError):
    """The arguments of :func:`tune_kernel` cannot describe a kernel launch (the message says
    which and what to give instead)."""


class LaunchSizeError(LiftmapError, ValueError):
    """A configuration's problem size or grid divisor cannot be computed (raised in the
    worker, it makes the candidate ``rejected:launch-size``)."""

    check = "launch-size"


# ----------------------------------------------------------------------------- sizes


_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow}


def eval_size(text: str, values: Mapping[str, Any]) -> int:
    """An integer expression over parameter names (``"n // block_size_x"``): numbers, names,
    ``+ - * / // % **``, ``min``, ``max``, parentheses; ``int()`` of the result, as Kernel
    Tuner evaluates its string sizes."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise LaunchSizeError(f"size {text!r}: unknown name {node.id!r} (parameters: "
                                      f"{', '.join(values)})")
            return values[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            return _ARITH[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("min", "max") and node.args and not node.keywords:
            fn = min if node.func.id == "min" else max
            return fn(ev(a) for a in node.args)
        raise LaunchSizeError(f"size {text!r}: only numbers, parameter names, + - * / // % "
                              f"**, min and max are allowed")

    try:
        return int(ev(ast.parse(text.strip(), mode="eval")))
    except SyntaxError:
        raise LaunchSizeError(f"size {text!r} is not an expression") from None
    except (ArithmeticError, TypeError, ValueError) as e:
        if isinstance(e, LaunchSizeError):
            raise
        raise LaunchSizeError(f"size {text!r} cannot be computed: {e}") from None


def _size_of(spec: Any, values: Mapping[str, Any], what: str) -> int:
    if callable(spec):
        try:
            return int(spec(dict(values)))
        except Exception as e:  # a user's function: its failure rejects the configuration
            raise LaunchSizeError(f"{what}: {type(e).__name__}: {e}") from None
    if isinstance(spec, str):
        return eval_size(spec, values)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return int(spec)
    raise TuneError(f"{what}: {spec!r} is not an int, a string expression or a function")


def problem_dims(problem_size: Any, values: Mapping[str, Any]) -> tuple[int, int, int]:
    """The problem size in three dimensions (Kernel Tuner's ``get_problem_size``)."""
    if callable(problem_size):
        try:
            problem_size = problem_size(dict(values))
        except Exception as e:  # a user's function: its failure rejects the configuration
            raise LaunchSizeError(f"problem_size: {type(e).__name__}: {e}") from None
    if isinstance(problem_size, (str, int, np.integer)):
        problem_size = (problem_size,)
    dims = [1, 1, 1]
    items = list(problem_size)
    if not 1 <= len(items) <= 3:
        raise TuneError(f"problem_size has {len(items)} dimensions; give 1 to 3")
    for i, s in enumerate(items):
        dims[i] = _size_of(s, values, f"problem_size[{i}]")
    return dims[0], dims[1], dims[2]


def launch_sizes(problem_size: Any, values: Mapping[str, Any],
                 grid_div: Sequence[Any], block_names: Sequence[str]
                 ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``(grid, block)`` of a configuration, as Kernel Tuner computes them: the block from
    the block-size parameters (256, 1, 1 when not tuned), the grid the problem size over
    each dimension's divisors (``None``: the block size parameter), rounded up."""
    block = tuple(int(values.get(n, d)) for n, d in zip(block_names, DEFAULT_BLOCK))
    dims = problem_dims(problem_size, values)
    grid = []
    for i, div in enumerate(grid_div):
        if div is None:
            d = int(values.get(block_names[i], 1))
        elif isinstance(div, (list, tuple)):
            d = math.prod(_size_of(x, values, f"grid_div[{i}]") for x in div)
        else:
            d = _size_of(div, values, f"grid_div[{i}]")
        if d <= 0:
            raise LaunchSizeError(f"grid divisor of dimension {'xyz'[i]} is {d}")
        grid.append(-(-dims[i] // d))
    return (grid[0], grid[1], grid[2]), (block[0], block[1], block[2])


def define_value(v: Any) -> str:
    """A parameter's value as the compiler sees it (a boolean as 1 or 0)."""
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    return str(v)


# ----------------------------------------------------------------------------- the kernel


@dataclass(frozen=True)
class KernelSpec:
    """A kernel launch without its configuration: source, arguments (buffers in order),
    output, build options (picklable: it travels to the worker)."""

    name: str
    source: str
    args: tuple[str, ...]
    buffers: tuple[Buffer, ...]
    output: str
    output_shape: tuple[int, ...]
    compiler_options: tuple[str, ...] = ()


def kernel_program(spec: KernelSpec, defines: tuple[tuple[str, str], ...],
                   global_size: tuple[int, ...], local_size: tuple[int, ...],
                   flops: int | None = None) -> CompiledProgram:
    """The one-kernel program of a configuration (its defines as ``-D`` options)."""
    opts = (*spec.compiler_options, *(f"-D{k}={v}" for k, v in defines))
    kern = Kernel(spec.name, spec.source, spec.args, tuple(global_size), tuple(local_size))
    return CompiledProgram((kern,), {b.name: b for b in spec.buffers},
                           tuple(b.name for b in spec.buffers), spec.output,
                           spec.output_shape, flops, opts)


def _refuse(error: LaunchSizeError) -> CompiledProgram:
    raise error


def _arguments(arguments: Sequence[Any], answer: Sequence[Any] | None
               ) -> tuple[dict[str, np.ndarray], list[str], list[Buffer], str, np.ndarray | None]:
    """Inputs by name (``arg0``, ...), argument names, buffers, the output's name and the
    reference."""
    if not isinstance(arguments, (list, tuple)) or not arguments:
        raise TuneError("arguments must be a non-empty list of numpy arrays and scalars, in "
                        "the kernel's order")
    if answer is not None and (not isinstance(answer, (list, tuple))
                               or len(answer) != len(arguments)):
        raise TuneError(f"answer must be a list as long as arguments ({len(arguments)}), "
                        f"with None for each argument not checked")
    inputs: dict[str, np.ndarray] = {}
    names, buffers = [], []
    for i, a in enumerate(arguments):
        name = f"arg{i}"
        names.append(name)
        if isinstance(a, np.ndarray) and a.ndim > 0:
            kind = DTYPE_NAMES.get(a.dtype)
            if kind is None:
                raise TuneError(f"argument {i} is an array of {a.dtype}: liftmap's runner "
                                f"takes float32 and int32 arrays (convert it, e.g. "
                                f"a.astype(np.float32))")
            inputs[name] = a
            buffers.append(Buffer(name, "global", kind, int(a.size), "input"))
        elif isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool):
            inputs[name] = np.asarray(a)
        else:
            raise TuneError(f"argument {i} ({type(a).__name__}) is neither a numpy array nor "
                            f"a number")
    checked = [i for i, x in enumerate(answer or []) if x is not None]
    if len(checked) > 1:
        raise TuneError(f"answer checks {len(checked)} arguments; liftmap compares one output "
                        f"(keep one, None for the others)")
    if checked and f"arg{checked[0]}" not in {b.name for b in buffers}:
        raise TuneError(f"answer checks argument {checked[0]}, which is not an array")
    if not buffers:
        raise TuneError("the kernel takes no array: give its output as an argument")
    out = f"arg{checked[0]}" if checked else buffers[0].name
    ref = None
    if checked and answer is not None:
        ref = np.asarray(answer[checked[0]])
        if ref.size != inputs[out].size:
            raise TuneError(f"answer for argument {checked[0]} has {ref.size} elements, the "
                            f"argument {inputs[out].size}")
    return inputs, names, buffers, out, ref


def _source(kernel_source: str | os.PathLike) -> str:
    text = os.fspath(kernel_source)
    if "\n" not in text and (text.endswith((".cl", ".c", ".h")) or os.path.isfile(text)):
        try:
            with open(text) as f:
                return f.read()
        except OSError as e:
            raise TuneError(f"cannot read kernel source {text}: {e.strerror}") from None
    return text


# ----------------------------------------------------------------------------- the space


class _Configs:
    """A tuning space over encoded configurations (ints; ``interop.encode_config``), the
    ``SearchSpace`` calls strategies make."""

    def __init__(self, space: SearchSpace, tune_params: Mapping[str, Sequence[Any]]):
        self.inner = space
        self.tune_params = {k: list(v) for k, v in tune_params.items()}
        self.params = {k: tuple(range(len(v))) if is_categorical(v) else tuple(v)
                       for k, v in self.tune_params.items()}

    def count(self) -> int:
        return self.inner.count()

    def _enc(self, cfg: Mapping[str, Any]) -> dict[str, int]:
        return encode_config(cfg, self.tune_params)

    def sample(self, k: int, seed: int | None = None) -> list[dict[str, int]]:
        return [self._enc(c) for c in self.inner.sample(k, seed=seed)]

    def iter_random(self, seed: int | None = None) -> Iterator[dict[str, int]]:
        return (self._enc(c) for c in self.inner.iter_random(seed=seed))

    def __contains__(self, cfg: object) -> bool:
        if not isinstance(cfg, Mapping) or set(cfg) != set(self.tune_params):
            return False
        try:
            return decode_tuning(cfg, self.tune_params) in self.inner
        except (IndexError, ValueError, TypeError):
            return False


@dataclass
class _Tuning:
    """The tuning space of the one (empty) mapping, as strategies read it."""

    space: _Configs
    features: dict[str, Any] = field(default_factory=dict)

    @property
    def params(self) -> dict[str, tuple[int, ...]]:
        return self.space.params

    def count(self) -> int:
        return self.space.count()


class KernelSpace:
    """The joint space of a user's kernel: no maps, one tuning space."""

    enumerate_s = 0.0

    def __init__(self, configs: _Configs, device: Any = None):
        self.problem = KernelOnly()
        self.mappings = [MapCodes({})]
        self.device = device
        self._tuning = _Tuning(configs)

    def tuning(self, mapping: Any) -> _Tuning:
        self.problem.mapping(mapping)  # only the empty mapping
        return self._tuning

    def count(self) -> int:
        return self._tuning.count()


@dataclass
class KernelTask(Task):
    """An exploration task over a user's kernel (``mapper.explore.explore`` runs it)."""

    kernel: KernelSpec | None = None
    space: KernelSpace | None = None
    problem_size: Any = None
    grid_div: tuple[Any, Any, Any] = (None, None, None)
    block_names: tuple[str, str, str] = BLOCK_SIZE_NAMES
    flops_fn: Callable[[dict[str, Any]], int] | None = None

    @property
    def explored_text(self) -> str:
        return ""

    def joint(self, device: Any = None) -> Any:
        assert self.space is not None
        return self.space

    def lower_fn(self, mapping: Mapping[str, int], tuning: Mapping[str, int]
                 ) -> Callable[[], CompiledProgram]:
        """The program of a configuration (its sizes computed here: the user's functions
        stay in this process); a size that cannot be computed rejects it."""
        assert self.kernel is not None and self.space is not None
        values = decode_tuning(tuning, self.space.tuning(mapping).space.tune_params)
        try:
            grid, block = launch_sizes(self.problem_size, values, self.grid_div,
                                       self.block_names)
            flops = None if self.flops_fn is None else int(self.flops_fn(dict(values)))
        except LaunchSizeError as e:
            return functools.partial(_refuse, e)
        defines = [*zip(GRID_NAMES, map(str, grid)), *zip(self.block_names, map(str, block)),
                   *((k, define_value(v)) for k, v in values.items()), ("kernel_tuner", "1")]
        merged = dict(defines)  # a tuned block size overrides the default one
        gsize = tuple(g * b for g, b in zip(grid, block))
        return functools.partial(kernel_program, self.kernel, tuple(merged.items()), gsize,
                                 block, flops)


# ----------------------------------------------------------------------------- the result


@dataclass
class TuneResult:
    """What :func:`tune_kernel` did: the run (``mapper.explore.run.Results``) and the
    declared parameters, to give configurations their values back."""

    results: Results
    tune_params: dict[str, list[Any]]
    space_size: int

    @property
    def records(self) -> list[Record]:
        return self.results.records

    @property
    def best(self) -> Record | None:
        """The fastest configuration that ran and matched ``answer`` (the re-timed winner
        when winners were re-timed), or None."""
        return self.results.final

    @property
    def best_config(self) -> dict[str, Any] | None:
        """The best configuration's parameter values."""
        b = self.best
        return None if b is None else decode_tuning(b.tuning, self.tune_params)

    def configs(self) -> list[dict[str, Any]]:
        """Every configuration tried, as Kernel Tuner's results list: the parameter values,
        ``time`` (ms) when it ran and matched, else ``status`` (``compile-error``...)."""
        out = []
        for r in self.records:
            d: dict[str, Any] = decode_tuning(r.tuning, self.tune_params)
            if r.ok and r.time_s is not None:
                d["time"] = r.time_s * 1000
                if r.gflops is not None:
                    d["GFLOP/s"] = r.gflops
            d["status"] = r.label
            out.append(d)
        return out

    def summary(self) -> str:
        """Some lines in words."""
        counts = ", ".join(f"{k} {v}" for k, v in self.results.counts.most_common())
        lines = [f"{len(self.records)} of {self.space_size} configurations tried "
                 f"({self.results.strategy}, stopped by {self.results.stopped_by}): {counts}"]
        b = self.best
        if b is None:
            lines.append("no configuration ran and matched the answer")
        else:
            cfg = " ".join(f"{k}={v}" for k, v in (self.best_config or {}).items())
            perf = f"{b.time_s * 1e3:.4g} ms" if b.time_s else ""
            if b.gflops:
                perf += f", {b.gflops:.3g} GFLOP/s"
            lines.append(f"best: {cfg}: {perf}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- tune_kernel


def tune_kernel(kernel_name: str, kernel_source: str | os.PathLike, problem_size: Any,
                arguments: Sequence[Any], tune_params: Mapping[str, Sequence[Any]], *,
                restrictions: Any = None, answer: Sequence[Any] | None = None,
                atol: float = 1e-6, rtol: float = 1e-5, grid_div_x: Any = None,
                grid_div_y: Any = None, grid_div_z: Any = None,
                block_size_names: Sequence[str] | None = None,
                compiler_options: Sequence[str] | None = None,
                flops: int | Callable[[dict[str, Any]], int] | None = None,
                strategy: str = "model", budget: int | str | None = None, seed: int = 0,
                store: str | os.PathLike | ResultStore | None = None,
                device: str | None = None, timeout_s: float = 10.0, repeats: int = 7,
                retime: int = 0, pool: Any = None,
                on_result: Callable[[Record, Results], None] | None = None,
                **strategy_options: Any) -> TuneResult:
    """Tunes an OpenCL kernel (see the module docstring); Kernel Tuner's arguments keep
    their names and meaning. ``flops``: the kernel's floating-point operations (an int or
    a function of the configuration) for GFLOP/s. ``strategy``, ``budget`` (candidates,
    or a time such as ``"2m"``; default: every configuration), ``seed``: the search.
    ``store``: the results store (a path keeps the records; None: in memory). ``device``:
    an OpenCL device spec (``codegen.device``). ``timeout_s``: the most one configuration
    may take to build and run (past it: ``timeout``). ``repeats``: timed runs of each
    (Kernel Tuner's ``iterations``). ``retime``: re-time that many winners at the end.
    Raises :class:`TuneError` for arguments that describe no launch and
    ``constraints.space.EmptySpaceError``-like errors for a space without configurations;
    a configuration's own failure is its record's status."""
    from codegen.worker import WorkerPool
    from mapper.explore.options import ExploreOptions
    from mapper.explore.run import explore
    from mapper.explore.store import device_description

    source = _source(kernel_source)
    if not isinstance(kernel_name, str) or not kernel_name.isidentifier():
        raise TuneError(f"kernel_name must be the kernel function's name, got {kernel_name!r}")
    if not re.search(rf"\b{re.escape(kernel_name)}\s*\(", source):
        raise TuneError(f"the source defines no function {kernel_name!r}")
    params = {str(k): list(v) for k, v in tune_params.items()}
    if not params:
        raise TuneError("tune_params is empty: give at least one parameter and its values")
    for k, vals in params.items():
        if not k.isidentifier():
            raise TuneError(f"parameter {k!r} is not a C identifier")
        for v in vals:
            if not isinstance(v, (int, float, str, bool, np.integer, np.floating)):
                raise TuneError(f"parameter {k!r}: value {v!r} is not a number, a string or "
                                f"a boolean")
            if re.search(r"\s", define_value(v)):
                raise TuneError(f"parameter {k!r}: value {v!r} holds a space, which a -D "
                                f"define cannot")
    params = {k: [v.item() if isinstance(v, np.generic) else v for v in vals]
              for k, vals in params.items()}
    block_names = tuple(block_size_names or BLOCK_SIZE_NAMES)
    if len(block_names) != 3:
        raise TuneError(f"block_size_names needs 3 names, got {list(block_names)}")
    inputs, names, buffers, out, reference = _arguments(arguments, answer)
    out_shape = tuple(np.asarray(arguments[int(out[3:])]).shape)
    spec = KernelSpec(kernel_name, source, tuple(names), tuple(buffers), out, out_shape,
                      tuple(compiler_options or ()))
    dims: dict[str, int] = {}
    if not callable(problem_size):
        ps = problem_size if isinstance(problem_size, (list, tuple)) else [problem_size]
        if all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in ps):
            dims = {d: int(s) for d, s in zip("xyz", ps)}
    sig = {"problem_size": repr(problem_size) if not dims else dims,
           "grid_div": [repr(g) for g in (grid_div_x, grid_div_y, grid_div_z)],
           "blocks": list(block_names), "options": list(spec.compiler_options),
           "args": [[b.name, b.dtype, b.count] for b in buffers],
           "scalars": {k: float(v) for k, v in inputs.items() if v.ndim == 0},
           "output": out, "answer": reference is not None, "flops": repr(flops),
           "params": params}
    text = source + "\n// liftmap.tune " + json.dumps(sig, sort_keys=True, default=str)

    own_pool = pool is None
    pool = pool if pool is not None else WorkerPool(device)
    own_store = not isinstance(store, ResultStore)
    st = store if isinstance(store, ResultStore) else ResultStore(
        os.fspath(store) if store is not None else ":memory:")
    try:
        limits = dict(pool.device_info().get("limits", {}))
        space = SearchSpace(params, restrictions, max_threads=int(
            limits.get("max_work_group_size", 1024)), block_size_names=block_names)
        space.require_nonempty()
        kspace = KernelSpace(_Configs(space, params))
        task = KernelTask(
            name=kernel_name, text=text, program=None, sizes=dims, inputs=inputs,
            reference=reference, flops=flops if isinstance(flops, int) else None,
            tolerance={"atol": float(atol), "rtol": float(rtol)}, kernel=spec, space=kspace,
            problem_size=problem_size, grid_div=(grid_div_x, grid_div_y, grid_div_z),
            block_names=(block_names[0], block_names[1], block_names[2]),
            flops_fn=flops if callable(flops) else None)
        ctx = Context(kernel_name, task.program_hash, dims, device_description(limits))
        st.bind(ctx, {TUNE_PARAMS_META: json.dumps(params), "kernel": kernel_name})
        res = explore(task, strategy=strategy, budget=budget or max(1, space.count()),
                      store=st, pool=pool, on_result=on_result,
                      options=ExploreOptions.of(seed=seed, timeout_s=timeout_s,
                                                repeats=repeats, cut=None, retime=retime),
                      **strategy_options)
        return TuneResult(res, params, space.count())
    finally:
        if own_store:
            st.close()
        if own_pool:
            pool.close()
