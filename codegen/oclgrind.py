"""Deep check of a ``CompiledProgram`` on the Oclgrind simulator.

Oclgrind (Debian package ``oclgrind``) simulates an OpenCL device and reports data races,
work-group (barrier) divergence, out-of-bounds and uninitialised accesses. Its launcher
``oclgrind [options] COMMAND`` sets ``LD_PRELOAD=.../liboclgrind-rt.so`` and execs the
command; the preloaded runtime's ``clGetPlatformIDs`` etc. take precedence over the ICD
loader bundled in pyopencl's wheel, so an unchanged pyopencl process sees exactly one
platform, "Oclgrind". ``check_with_oclgrind`` runs ``python -m codegen.oclgrind_child``
that way, with ``--log`` sending the simulator's messages to a file, which is parsed here.

It is slow (an interpreter for every work-item): use small sizes.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from codegen.program import CompiledProgram

KINDS = ("data-race", "barrier-divergence", "out-of-bounds", "uninitialized", "other")
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def oclgrind_available() -> bool:
    """True when the ``oclgrind`` launcher is on ``PATH``."""
    return shutil.which("oclgrind") is not None


@dataclass(frozen=True)
class OclgrindIssue:
    """One kind of error at one place; ``count`` is how many times Oclgrind reported it."""

    kind: str
    kernel: str
    message: str  # the headline without addresses, e.g. "Read-write data race at local memory"
    location: str  # "line 6: out[i] = tmp[(l+1)%4];" when Oclgrind names a line
    count: int = 1
    example: str = ""  # the first full report

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.kind} in kernel {self.kernel}: {self.message}{where} (x{self.count})"


@dataclass
class OclgrindReport:
    """What Oclgrind found; ``clean`` when it ran and reported nothing."""

    issues: list[OclgrindIssue] = field(default_factory=list)
    returncode: int | None = None
    error: str | None = None  # timeout, build failure, launcher failure
    output: np.ndarray | None = None
    seconds: float = 0.0
    log: str = ""
    truncated: bool = False  # Oclgrind stopped reporting after max_errors

    @property
    def clean(self) -> bool:
        return self.error is None and self.returncode == 0 and not self.issues

    def counts(self) -> dict[str, int]:
        """Reports per kind (all repetitions counted)."""
        out = dict.fromkeys(KINDS, 0)
        for i in self.issues:
            out[i.kind] += i.count
        return out

    def kinds(self) -> set[str]:
        return {i.kind for i in self.issues}

    def summary(self) -> str:
        """"clean", or one line per distinct issue (and the error, if any)."""
        if self.clean:
            return "clean"
        lines = [str(i) for i in self.issues]
        if self.error:
            lines.insert(0, f"error: {self.error}")
        return "\n".join(lines) or f"oclgrind exited with {self.returncode}"


def _classify(headline: str) -> str:
    h = headline.lower()
    if "data race" in h:
        return "data-race"
    if "divergence" in h:
        return "barrier-divergence"
    if h.startswith("invalid read") or h.startswith("invalid write") or "out-of-bounds" in h \
            or "out of bounds" in h:
        return "out-of-bounds"
    if "uninitiali" in h:
        return "uninitialized"
    return "other"


_ADDR = re.compile(r"\s*(at|address)?\s*0x[0-9a-fA-F]+")
_SUPPRESSED = re.compile(r"errors generated - suppressing further errors")
_AT_LINE = re.compile(r"At line (\d+) \(column \d+\) of [^:]*:")


def parse_oclgrind_log(text: str) -> list[OclgrindIssue]:
    """Groups Oclgrind's messages (a headline at column 0, details indented) into issues."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line and not line[0].isspace():
            blocks.append([line])
        elif blocks and line.strip():
            blocks[-1].append(line)
    found: dict[tuple, list] = {}
    for b in blocks:
        head = b[0].strip()
        if _SUPPRESSED.search(head):
            continue
        kind = _classify(head)
        kernel = ""
        location = ""
        for i, ln in enumerate(b[1:], 1):
            s = ln.strip()
            if s.startswith("Kernel:") and not kernel:
                kernel = s.split(":", 1)[1].strip()
            m = _AT_LINE.search(s)
            if m and not location:
                src = b[i + 1].strip() if i + 1 < len(b) else ""
                location = f"line {m.group(1)}: {src}"
        message = _ADDR.sub("", head).strip()
        key = (kind, kernel, message, location)
        if key in found:
            found[key][0] += 1
        else:
            found[key] = [1, "\n".join(b)]
    return [OclgrindIssue(k[0], k[1], k[2], k[3], n, ex) for k, (n, ex) in found.items()]


def check_with_oclgrind(program: CompiledProgram, inputs: Mapping[str, np.ndarray], *,
                        timeout_s: float = 300.0, data_races: bool = True,
                        uninitialized: bool = True, max_errors: int = 200,
                        optimize: bool = False,
                        extra_args: tuple[str, ...] = ()) -> OclgrindReport:
    """Runs ``program`` once on Oclgrind in a subprocess and reports what it found.

    Kernels are built with ``-cl-opt-disable`` unless ``optimize``: Oclgrind 21.10's
    uninitialised-value checker aborts on LLVM's ``freeze`` instruction, which the
    optimiser emits for a ``/`` and ``%`` by the same value; unoptimised code also keeps
    every memory access of the source. Raises ``FileNotFoundError`` if Oclgrind is not
    installed (``apt-get install oclgrind``).
    """
    if not optimize and "-cl-opt-disable" not in program.build_options:
        program = replace(program, build_options=(*program.build_options, "-cl-opt-disable"))
    exe = shutil.which("oclgrind")
    if exe is None:
        raise FileNotFoundError("oclgrind is not installed (Debian: apt-get install oclgrind)")
    tmp = tempfile.mkdtemp(prefix="liftmap-oclgrind-")
    try:
        job, out, log = (os.path.join(tmp, n) for n in ("job.pkl", "out.npy", "oclgrind.log"))
        with open(job, "wb") as f:
            pickle.dump((program, {k: np.asarray(v) for k, v in inputs.items()}), f)
        cmd = [exe, "--log", log, "--max-errors", str(max_errors)]
        if data_races:
            cmd.append("--data-races")
        if uninitialized:
            cmd.append("--uninitialized")
        cmd += [*extra_args, sys.executable, "-m", "codegen.oclgrind_child", job, out]
        env = dict(os.environ)
        env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
        env.pop("LIFTMAP_DEVICE", None)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=_ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        report = OclgrindReport()
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            report.error = f"timeout after {timeout_s:g} s (killed)"
        report.seconds = time.perf_counter() - t0
        report.returncode = proc.returncode
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
        report.log = text
        report.issues = parse_oclgrind_log(text)
        report.truncated = bool(_SUPPRESSED.search(text))
        if report.error is None and proc.returncode != 0:
            tail = "\n".join((stderr or stdout or "").strip().splitlines()[-8:])
            report.error = f"child exited with {proc.returncode}: {tail}"
        if os.path.exists(out):
            report.output = np.load(out)
        return report
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
