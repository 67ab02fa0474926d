"""The machine a benchmark ran on, as one line (every script prints it with its figures)."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

# AMD family 25 (0x19) holds Zen 3 and Zen 4 cores, told apart by the model number;
# family 23 (0x17) holds Zen and Zen+ (models below 0x30: Naples 0x01, Pinnacle Ridge 0x08)
# and Zen 2 (Rome 0x31, Renoir 0x60, Matisse 0x71, ...)
_ZEN4_MODELS_25 = (range(0x10, 0x20), range(0x60, 0x80), range(0xA0, 0xB0))


def amd_core(family: int, model: int) -> str:
    """The Zen generation of an AMD CPU family and model ("" when not known)."""
    if family == 25:
        return "Zen 4" if any(model in r for r in _ZEN4_MODELS_25) else "Zen 3"
    if family == 23:
        return "Zen 2" if model >= 0x30 else "Zen" if model >= 0 else "Zen/Zen 2"
    return {26: "Zen 5"}.get(family, "")


def cpu_model() -> str:
    """CPU model name (with its family, model, Zen generation and widest SIMD on x86, its
    clock when /proc/cpuinfo gives one) and the usable cores. The machines here alternate
    under one name ("AMD EPYC"): a Zen (AVX2, 128-bit FMA units), a Zen 3 (AVX2), a Zen 4
    (AVX-512) or a Zen 5."""
    name, mhz = platform.processor() or platform.machine(), None
    try:
        text = Path("/proc/cpuinfo").read_text()
        m = re.search(r"model name\s*:\s*(.+)", text)
        fam = re.search(r"cpu family\s*:\s*(\d+)", text)
        mod = re.search(r"^model\s*:\s*(\d+)", text, re.M)
        flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
        if fam:
            core = amd_core(int(fam.group(1)), int(mod.group(1)) if mod else -1) \
                if "AMD" in text else ""
            simd = ""
            if flags:
                fl = set(flags.group(1).split())
                simd = "AVX-512" if "avx512f" in fl else "AVX2" if "avx2" in fl else ""
            tags = ", ".join(t for t in (core, simd) if t)
            name_suffix = f", family {fam.group(1)} model {mod.group(1) if mod else '?'}" + \
                (f" ({tags})" if tags else "")
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


def save_json(path: str | None, obj: object) -> None:
    """``obj`` as indented JSON to ``path`` (values JSON lacks as their ``str``); nothing
    without a path."""
    import json

    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, default=str)
