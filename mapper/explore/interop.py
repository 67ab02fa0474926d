"""Kernel Tuner's cache files and T4 results in and out of liftmap's results stores.

Writing (``mapper results STORE --format kernel-tuner|t4 --out F.json``):

* a **Kernel Tuner cache** (:func:`to_kernel_tuner`): the JSON file Kernel Tuner 1.5 writes
  with ``cache=`` and replays with ``simulation_mode=True``. Every tuning parameter is its
  own key; the mapping is one more, categorical, parameter, ``mapping``, whose values are
  short codes (``"A=W0 B=L0 C=S"``); a parameter a mapping does not have is written
  :data:`ABSENT` (``-1``). An ``ok`` candidate has ``time`` (ms), ``times`` and
  ``GFLOP/s``; a failure has Kernel Tuner's error form, ``"__error__":
  "CompilationFailedConfig"`` (``InvalidConfig`` for a rejection, ``RuntimeFailedConfig``
  for a wrong result, a timeout or a crash). Kernel Tuner's timing keys
  (``compile_time``, ``verification_time``, ``benchmark_time``, ``strategy_time``,
  ``framework_time``, ms) are set, so its time budgets work in simulation. Each entry also
  keeps the record's own fields as ``liftmap_<field>`` scalars (read back exactly), and the
  file the store's meta and runs under the top-level key ``liftmap``.
* **T4 results** (:func:`to_t4`): the community format (``schema_version`` 1.0.0), valid
  under the schema Kernel Tuner ships (:func:`validate_t4`); times in milliseconds,
  ``invalidity`` one of ``correct``, ``constraints`` (rejected), ``compile``,
  ``correctness`` (wrong result), ``timeout``, ``runtime`` (crash). A result's record fields
  are under its ``liftmap`` key.

Reading (:func:`read_tuning_file`, and so ``mapper results F.json`` and a replay): either
format, written by liftmap or by someone else, becomes :class:`~mapper.explore.record.Record`
values. A record's tuning values are ints: a parameter whose values are not all
non-negative ints (strings, floats, booleans, negative numbers) is *categorical* and is read
as the position of its value in the parameter's list (``tune_params``), which the store's
meta keeps under ``tune_params`` (:func:`decode_tuning` gives the values back; exporting
again writes them). A file without a liftmap mapping reads as records with an empty
mapping, replayed over its stored configurations alone (:class:`KernelOnly`).

Kernel Tuner's own ``tune_cache`` restricts its space with one function over every
parameter, which makes python-constraint enumerate their whole Cartesian product (10^9 on
the committed data sets); :func:`kernel_tuner_restrictions` gives a restriction that
prunes as soon as a partial configuration matches no stored one, and
:func:`kernel_tuner_args` the arguments of ``kernel_tuner.tune_kernel`` for a simulation.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import tempfile
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ir.errors import LiftmapError
from mapper.encoding import MapCodes
from mapper.explore.record import Record
from mapper.explore.store import Context, ResultStore

__all__ = [
    "FORMATS",
    "MAPPING_PARAM",
    "ABSENT",
    "InteropError",
    "TuningFile",
    "KernelOnly",
    "ImportedStore",
    "is_tuning_file",
    "is_categorical",
    "encode_config",
    "decode_tuning",
    "to_kernel_tuner",
    "to_t4",
    "export_store",
    "read_tuning_file",
    "open_results",
    "t4_schema",
    "validate_t4",
    "kernel_tuner_restrictions",
    "kernel_tuner_args",
]

FORMATS = ("kernel-tuner", "t4")
MAPPING_PARAM = "mapping"
"""The categorical tuning parameter that holds a candidate's mapping in short codes."""
ABSENT = -1
"""The value written for a tuning parameter a candidate's mapping does not have."""
FORMAT_VERSION = 1
T4_VERSION = "1.0.0"
TUNE_PARAMS_META = "tune_params"  # store meta: the declared parameters' values (JSON)
ORIGIN_META = "imported_from"  # store meta: the file an imported store was read from

_KT_ERROR = {"rejected": "InvalidConfig", "compile-error": "CompilationFailedConfig",
             "wrong-result": "RuntimeFailedConfig", "timeout": "RuntimeFailedConfig",
             "crash": "RuntimeFailedConfig"}
_STATUS_OF_KT = {"InvalidConfig": "rejected", "CompilationFailedConfig": "compile-error",
                 "RuntimeFailedConfig": "crash", "ErrorConfig": "crash"}
_T4_INVALIDITY = {"ok": "correct", "rejected": "constraints", "compile-error": "compile",
                  "wrong-result": "correctness", "timeout": "timeout", "crash": "runtime"}
_STATUS_OF_T4 = {v: k for k, v in _T4_INVALIDITY.items()}
_KT_TIMING = ("time", "times", "compile_time", "verification_time", "benchmark_time",
              "strategy_time", "framework_time", "timestamp", "GFLOP/s", "__error__")
_PREFIX = "liftmap_"
_RECORD_FIELDS = tuple(f.name for f in dataclasses.fields(Record)
                       if f.name not in ("mapping", "tuning", "cached"))


class InteropError(LiftmapError, ValueError):
    """A file is not a Kernel Tuner cache or T4 results file liftmap can read, or cannot be
    written in the format asked (the message says which and what to do)."""


# ----------------------------------------------------------------------------- tuning values


def _plain_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def is_categorical(values: Iterable[Any]) -> bool:
    """Whether a parameter's values are stored by position: not all non-negative ints."""
    return not all(_plain_int(v) for v in values)


def encode_config(config: Mapping[str, Any],
                  tune_params: Mapping[str, Sequence[Any]]) -> dict[str, int]:
    """A configuration as a record's ints: categorical values (:func:`is_categorical`) as
    their position in ``tune_params``; a parameter not in ``tune_params`` must be an int."""
    out: dict[str, int] = {}
    for k, v in config.items():
        dom = tune_params.get(k)
        if dom is not None and is_categorical(dom):
            try:
                out[k] = list(dom).index(v)
            except ValueError:
                raise InteropError(f"parameter {k!r}: value {v!r} is not among its values "
                                   f"{list(dom)!r}") from None
        elif _plain_int(v):
            out[k] = int(v)
        else:
            raise InteropError(f"parameter {k!r}: value {v!r} is not a non-negative int and "
                               f"its list of values is unknown; give it in tune_params")
    return out


def decode_tuning(tuning: Mapping[str, int],
                  tune_params: Mapping[str, Sequence[Any]] | None) -> dict[str, Any]:
    """The values a record's ints stand for (see :func:`encode_config`)."""
    out: dict[str, Any] = {}
    for k, v in tuning.items():
        dom = (tune_params or {}).get(k)
        out[k] = list(dom)[int(v)] if dom is not None and is_categorical(dom) else int(v)
    return out


def _tune_params_of(meta: Mapping[str, str]) -> dict[str, list[Any]] | None:
    text = meta.get(TUNE_PARAMS_META)
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return {str(k): list(v) for k, v in doc.items()} if isinstance(doc, dict) else None


# ----------------------------------------------------------------------------- a store's content


@dataclass
class TuningFile:
    """What a store, a Kernel Tuner cache or a T4 file holds, as liftmap reads it: the
    records (tuning values as ints), the store's meta (``tune_params`` among it for
    categorical parameters), its runs, and where it came from."""

    records: list[Record]
    meta: dict[str, str] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    path: str | None = None
    format: str = "store"

    @property
    def tune_params(self) -> dict[str, list[Any]] | None:
        """The declared values of each parameter (None: all plain ints, not declared)."""
        return _tune_params_of(self.meta)

    @property
    def kernel_name(self) -> str:
        return self.meta.get("program", "liftmap")

    @property
    def device_name(self) -> str:
        try:
            return str(json.loads(self.meta.get("device", "{}")).get("name", "unknown"))
        except (ValueError, AttributeError):
            return "unknown"

    @property
    def sizes(self) -> dict[str, int]:
        try:
            return {str(k): int(v) for k, v in json.loads(self.meta.get("sizes", "{}")).items()}
        except (ValueError, AttributeError, TypeError):
            return {}

    @classmethod
    def of_store(cls, store: str | os.PathLike | ResultStore) -> TuningFile:
        """The content of a results store (a path is opened read-only)."""
        st = store if isinstance(store, ResultStore) else ResultStore(store, readonly=True)
        try:
            return cls(st.records(), dict(st.meta()), list(st.runs()), st.path, "store")
        finally:
            if st is not store:
                st.close()


def _liftmap_doc(tf: TuningFile, params: Sequence[str]) -> dict[str, Any]:
    return {"version": FORMAT_VERSION, "mapping_param": MAPPING_PARAM, "absent": ABSENT,
            "params": list(params), "meta": tf.meta,
            "runs": [{k: v for k, v in r.items() if v is not None} for r in tf.runs]}


def _params(tf: TuningFile) -> tuple[list[str], dict[str, list[Any]], bool]:
    """The parameters in order (the mapping first when any record has one), each one's
    values (declared, else the stored ones sorted, with ABSENT first where a record lacks
    it) and whether the mapping is one of them."""
    declared = tf.tune_params or {}
    names = list(declared) + sorted({k for r in tf.records for k in r.tuning} - set(declared))
    values: dict[str, list[Any]] = {}
    for p in names:
        if p in declared:
            vals = list(declared[p])
        else:
            vals = sorted({int(r.tuning[p]) for r in tf.records if p in r.tuning})
        if any(p not in r.tuning for r in tf.records):
            if ABSENT in vals:
                raise InteropError(f"parameter {p!r} takes the value {ABSENT}, which stands "
                                   f"for a parameter a mapping does not have")
            vals = [ABSENT, *vals]
        values[p] = vals
    with_mapping = any(len(r.mapping) for r in tf.records)
    if with_mapping:
        if MAPPING_PARAM in values:
            raise InteropError(f"a tuning parameter is called {MAPPING_PARAM!r}, the name "
                               f"of the mapping's parameter")
        maps = sorted({r.short_mapping for r in tf.records})
        values = {MAPPING_PARAM: maps, **values}
        names = [MAPPING_PARAM, *names]
    return names, values, with_mapping


def _config(r: Record, names: Sequence[str], tune_params: Mapping[str, Sequence[Any]] | None,
            absent: bool = True) -> dict[str, Any]:
    decoded = decode_tuning(r.tuning, tune_params)
    out: dict[str, Any] = {}
    for p in names:
        if p == MAPPING_PARAM and p not in decoded:
            out[p] = r.short_mapping
        elif p in decoded:
            out[p] = decoded[p]
        elif absent:
            out[p] = ABSENT
    return out


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat()


def _unix(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        d = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=datetime.timezone.utc)
    return d.timestamp()


def _ms(s: float | None) -> float:
    return 0.0 if s is None else 1000.0 * float(s)


def _timings(r: Record) -> dict[str, float]:
    """Kernel Tuner's timing keys (ms) of a record."""
    inner = (r.lower_s or 0.0) + (r.build_s or 0.0) + (r.run_s or 0.0)
    return {"compile_time": _ms((r.lower_s or 0.0) + (r.build_s or 0.0)),
            "verification_time": 0.0, "benchmark_time": _ms(r.run_s),
            "strategy_time": _ms(r.search_s),
            "framework_time": _ms(max(0.0, (r.wall_s or inner) - inner))}


def _record_fields(r: Record) -> dict[str, Any]:
    return {f: getattr(r, f) for f in _RECORD_FIELDS if getattr(r, f) is not None}


# ----------------------------------------------------------------------------- writing


def _unique(records: Iterable[Record], names: Sequence[str],
            tune_params: Mapping[str, Sequence[Any]] | None) -> list[tuple[Record, dict]]:
    """Records with their configurations, the first of each configuration only."""
    seen: set[str] = set()
    out = []
    for r in records:
        cfg = _config(r, names, tune_params)
        key = ",".join(str(cfg[p]) for p in names)
        if key not in seen:
            seen.add(key)
            out.append((r, cfg))
    return out


def kernel_tuner_name(name: str) -> str:
    """``name`` as a cache's ``kernel_name`` Kernel Tuner 1.5 can load: it compiles the name
    into a regular expression (``util.check_argument_list``) and compares it with the
    cache's, so a regex metacharacter (``[``, ``(``, ``*``...: a store of a run with options,
    ``conv:19,21/8 [fusion-always-heuristics-on]``) becomes ``_``. Reading a cache
    back takes the name from the liftmap document, not from this field."""
    return re.sub(r"[\\\[\](){}*+?|^$]", "_", name)


def to_kernel_tuner(tf: TuningFile) -> dict[str, Any]:
    """The Kernel Tuner 1.5 cache document of ``tf`` (see the module docstring); a
    configuration stored twice is written once (the first)."""
    names, values, _ = _params(tf)
    tp = tf.tune_params
    if any("," in str(v) for vals in values.values() for v in vals):
        raise InteropError("a parameter value holds a comma, which Kernel Tuner's cache keys "
                           "cannot tell apart")
    cache: dict[str, dict[str, Any]] = {}
    for r, cfg in _unique(tf.records, names, tp):
        entry: dict[str, Any] = dict(cfg)
        if r.ok and r.time_s is not None:
            entry["time"] = _ms(r.time_s)
            entry["times"] = [_ms(r.time_s)]
            if r.gflops is not None:
                entry["GFLOP/s"] = r.gflops
        else:
            entry["__error__"] = _KT_ERROR.get(r.status, "RuntimeFailedConfig")
        entry.update(_timings(r))
        stamp = _iso(r.created)
        if stamp is not None:
            entry["timestamp"] = stamp
        entry.update({_PREFIX + k: v for k, v in _record_fields(r).items()})
        cache[",".join(str(cfg[p]) for p in names)] = entry
    dims = list(tf.sizes.values())  # Kernel Tuner's problem sizes have 1 to 3 dimensions
    return {"device_name": tf.device_name, "kernel_name": kernel_tuner_name(tf.kernel_name),
            "problem_size": dims if 1 <= len(dims) <= 3 else [math.prod(dims)],
            "tune_params_keys": names,
            "tune_params": values, "objective": "time", "liftmap": _liftmap_doc(tf, names),
            "cache": cache}


def to_t4(tf: TuningFile) -> dict[str, Any]:
    """The T4 results document (schema 1.0.0) of ``tf``; parameters a mapping does not have
    are left out of its configurations."""
    names, _, _ = _params(tf)
    tp = tf.tune_params
    results = []
    for r in tf.records:
        t = _timings(r)
        times: dict[str, Any] = {
            "compilation_time": t["compile_time"], "framework": t["framework_time"],
            "search_algorithm": t["strategy_time"], "validation": t["verification_time"],
            "runtimes": [_ms(r.time_s)] if r.time_s is not None else []}
        measurements: list[dict[str, Any]] = []
        if r.time_s is not None:
            measurements.append({"name": "time", "value": _ms(r.time_s), "unit": "ms"})
        if r.gflops is not None:
            measurements.append({"name": "GFLOP/s", "value": r.gflops, "unit": "GFLOP/s"})
        out: dict[str, Any] = {
            "configuration": _config(r, names, tp, absent=False), "objectives": ["time"],
            "times": times, "invalidity": _T4_INVALIDITY.get(r.status, "runtime"),
            "correctness": 1 if r.ok else 0, "measurements": measurements,
            "liftmap": _record_fields(r)}
        stamp = _iso(r.created)
        if stamp is not None:
            out["timestamp"] = stamp
        results.append(out)
    return {"schema_version": T4_VERSION, "results": results,
            "metadata": {"timeunit": "milliseconds", "liftmap": _liftmap_doc(tf, names)}}


def export_store(store: str | os.PathLike | ResultStore, fmt: str,
                 out: str | os.PathLike) -> int:
    """Writes a store (or an imported file's content) as ``fmt`` (``kernel-tuner`` or
    ``t4``) to ``out``; returns how many candidates were written. A T4 file is validated
    against Kernel Tuner's schema when Kernel Tuner is installed."""
    if fmt not in FORMATS:
        raise InteropError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    tf = read_tuning_file(store) if isinstance(store, (str, os.PathLike)) \
        and is_tuning_file(store) else TuningFile.of_store(store)
    if fmt == "kernel-tuner":
        doc = to_kernel_tuner(tf)
        n = len(doc["cache"])
    else:
        doc = to_t4(tf)
        try:
            validate_t4(doc)
        except _NoSchema:
            pass
        n = len(doc["results"])
    try:
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    except OSError as e:
        raise InteropError(f"cannot write {os.fspath(out)}: {e.strerror}") from None
    return n


# ----------------------------------------------------------------------------- T4 schema


class _NoSchema(InteropError):
    """Kernel Tuner (which ships the T4 schema) is not installed."""


def t4_schema() -> dict[str, Any]:
    """The T4 results schema Kernel Tuner ships (``kernel_tuner/schema/T4/1.0.0``)."""
    from importlib.resources import files

    try:
        res = files("kernel_tuner") / "schema" / "T4" / T4_VERSION / "results-schema.json"
        return dict(json.loads(res.read_text()))
    except (ModuleNotFoundError, FileNotFoundError):
        raise _NoSchema("the T4 schema comes with Kernel Tuner: pip install "
                        "'kernel_tuner==1.5.*' (liftmap's kernel-tuner extra)") from None


def validate_t4(doc: Mapping[str, Any]) -> None:
    """Raises :class:`InteropError` unless ``doc`` is valid under Kernel Tuner's T4 results
    schema (needs ``kernel_tuner`` and ``jsonschema``)."""
    schema = t4_schema()
    try:
        import jsonschema
    except ModuleNotFoundError:
        raise _NoSchema("validating T4 needs jsonschema (installed with kernel_tuner)") \
            from None
    try:
        jsonschema.validate(dict(doc), schema)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        raise InteropError(f"not valid T4 results at {where}: {e.message}") from None


# ----------------------------------------------------------------------------- reading


def is_tuning_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a JSON file (a Kernel Tuner cache or T4 results), not a
    store."""
    return os.fspath(path).lower().endswith(".json")


def _load_json(path: str) -> Any:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError as e:
        raise InteropError(f"cannot read {path}: {e.strerror}") from None
    # a cache Kernel Tuner left open (tuning interrupted): close it as Kernel Tuner does
    if text and text[-3:] not in ("}\n}", "}}}") and '"cache"' in text:
        text = text.rstrip(",") + "}\n}"
    try:
        return json.loads(text)
    except ValueError as e:
        raise InteropError(f"{path} is not JSON ({e}); give a Kernel Tuner cache file or T4 "
                           f"results") from None


def read_tuning_file(path: str | os.PathLike) -> TuningFile:
    """The records of a Kernel Tuner cache or a T4 results file (see the module
    docstring); :class:`InteropError` if it is neither."""
    path = os.fspath(path)
    doc = _load_json(path)
    if isinstance(doc, dict) and isinstance(doc.get("cache"), dict) \
            and isinstance(doc.get("tune_params_keys"), list):
        return _read_kernel_tuner(doc, path)
    if isinstance(doc, dict) and isinstance(doc.get("results"), list) \
            and "schema_version" in doc:
        return _read_t4(doc, path)
    raise InteropError(f"{path} is neither a Kernel Tuner cache (keys tune_params_keys and "
                       f"cache) nor T4 results (keys schema_version and results)")


def _liftmap_of(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    lm = doc.get("liftmap")
    return dict(lm) if isinstance(lm, dict) and lm.get("version") == FORMAT_VERSION else None


def _domains(names: Sequence[str], configs: Sequence[Mapping[str, Any]],
             declared: Mapping[str, Sequence[Any]] | None) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for p in names:
        if declared is not None and p in declared:
            out[p] = list(declared[p])
            continue
        seen: list[Any] = []
        for c in configs:
            if p in c and c[p] not in seen:
                seen.append(c[p])
        try:
            seen.sort()
        except TypeError:
            pass
        out[p] = seen
    return out


def _build(path: str, fmt: str, names: Sequence[str], rows: Sequence[tuple[dict, dict]],
           lm: dict[str, Any] | None, header: Mapping[str, Any],
           declared: Mapping[str, Sequence[Any]] | None) -> TuningFile:
    """Records of ``rows`` ((configuration, fields)) over the parameters ``names``."""
    mapping_param = lm.get("mapping_param") if lm else None
    absent = lm.get("absent", ABSENT) if lm else None
    params = [p for p in names if p != mapping_param]
    configs = [{p: v for p, v in c.items() if p in params and not (lm and v == absent)}
               for c, _ in rows]
    doms = _domains(params, configs, None if declared is None else {
        p: [v for v in d if not (lm and v == absent)] for p, d in declared.items()})
    meta = {str(k): str(v) for k, v in (lm or {}).get("meta", {}).items()}
    if not lm:
        sizes = header.get("problem_size")
        if isinstance(sizes, int):
            sizes = [sizes]
        dims = {n: int(v) for n, v in zip("xyz", sizes or []) if isinstance(v, int)}
        name = str(header.get("kernel_name") or os.path.splitext(os.path.basename(path))[0])
        meta.update(program=name, sizes=json.dumps(dims),
                    device=json.dumps({"name": str(header.get("device_name") or "unknown")}),
                    program_hash=hashlib.sha256(
                        json.dumps([name, doms], default=str).encode()).hexdigest())
    categorical = {p: d for p, d in doms.items() if is_categorical(d)}
    if categorical or TUNE_PARAMS_META in meta:
        known = _tune_params_of(meta) or {}
        meta[TUNE_PARAMS_META] = json.dumps({**{p: doms[p] for p in params}, **known})
    records = []
    for i, ((cfg, fields), plain) in enumerate(zip(rows, configs)):
        try:
            tuning = encode_config(plain, doms)
        except InteropError as e:
            raise InteropError(f"{path}: {e}") from None
        mapping: Any = {}
        if mapping_param and isinstance(cfg.get(mapping_param), str):
            try:
                mapping = MapCodes.parse(cfg[mapping_param])
            except LiftmapError as e:
                raise InteropError(f"{path}: mapping {cfg[mapping_param]!r}: {e}") from None
        key = hashlib.sha256(json.dumps([meta.get("program_hash"), mapping and
                                         MapCodes(dict(mapping)).numeric(), tuning],
                                        sort_keys=True).encode()).hexdigest()[:32]
        base: dict[str, Any] = {"key": key, "run_id": f"{fmt}-import", "strategy": fmt,
                                "idx": i, **fields}
        records.append(Record(**{k: v for k, v in base.items() if k in _RECORD_FIELDS},
                              mapping=mapping, tuning=tuning))
    runs = [dict(r) for r in (lm or {}).get("runs", []) if isinstance(r, dict)]
    return TuningFile(records, meta, runs, path, fmt)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _kt_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A record's fields from a Kernel Tuner cache entry (exact ones when liftmap wrote
    it)."""
    own = {k[len(_PREFIX):]: v for k, v in entry.items() if k.startswith(_PREFIX)}
    if "status" in own:
        return own
    error = entry.get("__error__")
    if error is None:  # Kernel Tuner's older form: the error as a value of any key
        error = next((v for v in entry.values() if isinstance(v, str) and v in _STATUS_OF_KT),
                     None)
    ms = {k: _num(entry.get(k)) for k in ("compile_time", "verification_time",
                                          "benchmark_time", "strategy_time", "framework_time")}
    time_ms = _num(entry.get("time"))
    gflops = next((_num(entry[k]) for k in ("GFLOP/s", "GFLOPS", "GFLOPs", "gflops")
                   if k in entry and _num(entry[k]) is not None), None)
    status = _STATUS_OF_KT.get(str(error), "crash") if error is not None else \
        "ok" if time_ms is not None else "crash"
    spent = [v for k, v in ms.items() if k != "strategy_time" and v is not None]
    return {"status": status, "time_s": time_ms / 1000 if time_ms is not None and
            status == "ok" else None, "gflops": gflops if status == "ok" else None,
            "build_s": None if ms["compile_time"] is None else ms["compile_time"] / 1000,
            "run_s": None if ms["benchmark_time"] is None else ms["benchmark_time"] / 1000,
            "search_s": None if ms["strategy_time"] is None else ms["strategy_time"] / 1000,
            "wall_s": sum(spent) / 1000 if spent else None,
            "created": _unix(entry.get("timestamp")),
            "reason": None if error is None else f"Kernel Tuner: {error}"}


def _read_kernel_tuner(doc: dict[str, Any], path: str) -> TuningFile:
    names = [str(n) for n in doc["tune_params_keys"]]
    declared = doc.get("tune_params") if isinstance(doc.get("tune_params"), dict) else None
    rows = []
    for key, entry in doc["cache"].items():
        if not isinstance(entry, dict):
            raise InteropError(f"{path}: cache entry {key!r} is not an object")
        missing = [p for p in names if p not in entry]
        if missing:
            raise InteropError(f"{path}: cache entry {key!r} lacks parameter(s) "
                               f"{', '.join(missing)}")
        rows.append(({p: entry[p] for p in names}, _kt_fields(entry)))
    return _build(path, "kernel-tuner", names, rows, _liftmap_of(doc), doc, declared)


def _t4_fields(res: Mapping[str, Any], unit_s: float) -> dict[str, Any]:
    own = res.get("liftmap")
    if isinstance(own, dict) and "status" in own:
        return dict(own)
    status = _STATUS_OF_T4.get(str(res.get("invalidity")), "crash")
    meas = {m.get("name"): m.get("value") for m in res.get("measurements") or []
            if isinstance(m, dict)}
    got = res.get("times")
    times: dict[str, Any] = got if isinstance(got, dict) else {}
    t = _num(meas.get("time"))
    if t is None:
        runs = [x for x in times.get("runtimes") or [] if _num(x) is not None]
        t = statistics.median(runs) if runs else None
    g = _num(meas.get("GFLOP/s"))
    comp = _num(times.get("compilation_time"))
    return {"status": status, "time_s": t * unit_s if t is not None and status == "ok"
            else None, "gflops": g if status == "ok" else None,
            "build_s": None if comp is None else comp * unit_s,
            "search_s": None if _num(times.get("search_algorithm")) is None
            else float(times["search_algorithm"]) * unit_s,
            "created": _unix(res.get("timestamp")),
            "reason": None if status == "ok" else f"T4: {res.get('invalidity')}"}


def _read_t4(doc: dict[str, Any], path: str) -> TuningFile:
    got = doc.get("metadata")
    meta: dict[str, Any] = got if isinstance(got, dict) else {}
    unit = str(meta.get("timeunit", "milliseconds")).lower()
    unit_s = {"seconds": 1.0, "s": 1.0, "microseconds": 1e-6, "us": 1e-6,
              "nanoseconds": 1e-9, "ns": 1e-9}.get(unit, 1e-3)
    lm = _liftmap_of(meta)
    rows, names = [], []
    for i, res in enumerate(doc["results"]):
        cfg = res.get("configuration") if isinstance(res, dict) else None
        if not isinstance(cfg, dict):
            raise InteropError(f"{path}: result {i} has no configuration object")
        for p in cfg:
            if p not in names:
                names.append(p)
        rows.append((dict(cfg), _t4_fields(res, unit_s)))
    if lm and isinstance(lm.get("params"), list):
        names = [p for p in lm["params"] if p in names] + \
            [p for p in names if p not in lm["params"]]
    return _build(path, "t4", names, rows, lm, {"kernel_name": None}, None)


# ----------------------------------------------------------------------------- as a store


class ImportedStore(ResultStore):
    """A results store holding what a Kernel Tuner cache or T4 file holds, in a temporary
    folder removed on :meth:`close`; its ``path`` is the file's."""

    def __init__(self, tf: TuningFile):
        self._tmp = tempfile.mkdtemp(prefix="liftmap-import-")
        weakref.finalize(self, shutil.rmtree, self._tmp, True)  # also when never closed
        super().__init__(os.path.join(self._tmp, "imported.sqlite"))
        try:
            meta = dict(tf.meta)
            meta.setdefault(ORIGIN_META, tf.path or "?")
            ctx = Context(meta.pop("program", "?"), meta.pop("program_hash", "?"),
                          tf.sizes, json.loads(meta.pop("device", "{}") or "{}"))
            meta.pop("sizes", None)
            self.bind(ctx, {k: v for k, v in meta.items() if k != "schema_version"})
            for r in tf.runs:
                if r.get("run_id"):
                    options = r.get("options")
                    self.start_run(str(r["run_id"]), str(r.get("strategy") or "?"),
                                   int(r.get("seed") or 0), str(r.get("budget") or ""),
                                   options if isinstance(options, dict) else {})
                    self.finish_run(str(r["run_id"]), str(r.get("stopped_by") or "imported"),
                                    int(r.get("evaluated") or 0), int(r.get("cached") or 0),
                                    r.get("draws"), r.get("mapping_s"))
            for rec in tf.records:
                self.add(rec)
        except BaseException:
            self.close()
            raise
        self.path = tf.path or self.path

    def close(self) -> None:
        try:
            super().close()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)


def open_results(path: str | os.PathLike) -> ResultStore:
    """A results store read-only, or a Kernel Tuner cache or T4 file as an
    :class:`ImportedStore`."""
    if is_tuning_file(path):
        return ImportedStore(read_tuning_file(path))
    return ResultStore(path, readonly=True)


# ----------------------------------------------------------------------------- replay


class KernelOnly:
    """The mapping problem of a kernel without liftmap maps (a user's own kernel, a Kernel
    Tuner cache made elsewhere): no labels, no constraints, the one empty mapping."""

    labels: tuple[str, ...] = ()
    constraints: tuple[Any, ...] = ()
    fusion: str | None = None
    program: Any = None

    def mapping(self, m: Any) -> MapCodes:
        codes = MapCodes(dict(m)) if not isinstance(m, MapCodes) else m
        if len(codes):
            raise InteropError(f"a kernel without maps has no mapping {codes}")
        return codes


# ----------------------------------------------------------------------------- Kernel Tuner


def kernel_tuner_restrictions(cache: Mapping[str, Any] | str | os.PathLike,
                              *, failures: bool = True) -> list[Any]:
    """Restrictions for ``kernel_tuner.tune_kernel`` that make its space exactly the
    configurations of a cache (``failures=False``: only those that ran, as Kernel Tuner's
    ``tune_cache`` does). One python-constraint ``FunctionConstraint`` over every parameter,
    told to check partial configurations: python-constraint prunes as soon as the values
    chosen so far match no stored configuration, instead of enumerating the Cartesian
    product."""
    from constraint import FunctionConstraint
    from constraint.domain import Unassigned

    doc = cache if isinstance(cache, Mapping) else _load_json(os.fspath(cache))
    names = list(doc["tune_params_keys"])
    index: list[dict[Any, int]] = [{} for _ in names]
    n = 0
    for entry in doc["cache"].values():
        if not failures and "__error__" in entry:
            continue
        for i, p in enumerate(names):
            index[i][entry[p]] = index[i].get(entry[p], 0) | (1 << n)
        n += 1
    everything = (1 << n) - 1

    def stored(*values: Any) -> bool:
        alive = everything
        for i, v in enumerate(values):
            if v is Unassigned:  # not chosen yet
                continue
            alive &= index[i].get(v, 0)
            if not alive:
                return False
        return True

    return [FunctionConstraint(stored, assigned=False)]


def kernel_tuner_args(path: str | os.PathLike, *, failures: bool = True) -> dict[str, Any]:
    """Keyword arguments of ``kernel_tuner.tune_kernel`` that replay the cache at ``path``
    in simulation mode (add ``strategy=``, ``strategy_options=``...)."""
    doc = _load_json(os.fspath(path))
    if not isinstance(doc, dict) or "tune_params_keys" not in doc:
        raise InteropError(f"{os.fspath(path)} is not a Kernel Tuner cache")
    size = doc.get("problem_size") or [1]
    return {"kernel_name": doc["kernel_name"], "kernel_source": "",
            "problem_size": tuple(size if isinstance(size, list) else [size]),
            "arguments": [], "tune_params": doc["tune_params"],
            "restrictions": kernel_tuner_restrictions(doc, failures=failures),
            "cache": os.fspath(path), "simulation_mode": True, "quiet": True}
