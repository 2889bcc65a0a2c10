"""Helpers shared by the benchmarks: machine facts, RSS from /proc, percentiles, figure lines."""

from __future__ import annotations

import os
import platform
import statistics
from datetime import datetime, timezone
from typing import Optional


def proc_status(pid: int | str = "self", key: str = "VmRSS") -> Optional[int]:
    """A /proc/PID/status figure (VmRSS, VmHWM ...) in bytes; None where /proc is missing."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = proc_meminfo_total()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0, 0, 0)
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu, "nproc": str(os.cpu_count()),
            "memory": f"{mem / 2**30:.1f} GiB" if mem else "unknown", "python": platform.python_version(),
            "loadavg": " ".join(f"{x:.2f}" for x in load)}


def proc_meminfo_total() -> Optional[int]:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank on sorted values); p50 is the median."""
    if not values:
        return float("nan")
    if p == 50:
        return statistics.median(values)
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def figure(name: str, value: str, target: str = "", met: Optional[bool] = None) -> str:
    """One printed figure line: name, value, target, and whether the target is met."""
    mark = "" if met is None else ("  MET" if met else "  MISSED")
    tgt = f"  (target {target})" if target else ""
    return f"{name:<48} {value:>16}{tgt}{mark}"
