"""What a benchmark ran on: the CPU model and the code's git revision (kept light: no
peers imported, so every benchmark script can describe its machine)."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def revision() -> str:
    try:
        described = subprocess.run(["git", "describe", "--always", "--dirty"],
                                   cwd=Path(__file__).parent, capture_output=True, text=True,
                                   check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return described.stdout.strip()
