"""The machine a benchmark ran on, as one line (every script prints it with its figures)."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path


def cpu_model() -> str:
    """CPU model name (with its clock when /proc/cpuinfo gives one) and the usable cores."""
    name, mhz = platform.processor() or platform.machine(), None
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"model name\s*:\s*(.+)", text)
        fam = re.search(r"cpu family\s*:\s*(\d+)", text)
        if fam:  # the same "AMD EPYC" name is a Zen 4 (family 25) or a Zen 5 (26) here
            zen = {"25": " (Zen 3/4)", "26": " (Zen 5)"}.get(fam.group(1), "")
            name_suffix = f", family {fam.group(1)}{zen}"
        else:
            name_suffix = ""
        f = re.search(r"cpu MHz\s*:\s*([\d.]+)", text)
        name = (m.group(1).strip() if m else name) + name_suffix
        mhz = float(f.group(1)) if f else None
    except OSError:
        pass
    clock = f" @ {mhz:.0f} MHz" if mhz else ""
    cores = len(os.sched_getaffinity(0))
    return f"{name}{clock}, {cores} cores, Python {platform.python_version()}"
