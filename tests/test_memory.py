"""retain_freed_memory: glibc's malloc keeps freed large blocks (opt-in, process-wide)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

import numfuse
from numfuse import memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="the setting exists in glibc's malloc only")
def test_glibc_accepts_the_settings():
    assert numfuse.retain_freed_memory(64 << 20) is True


def test_without_a_c_library_it_returns_false(monkeypatch):
    monkeypatch.setattr(memory.ctypes.util, "find_library", lambda name: "no-such-libc.so")
    assert memory.retain_freed_memory(1 << 40) is False


@pytest.mark.skipif(not GLIBC, reason="the setting exists in glibc's malloc only")
def test_the_environment_variable_applies_it_at_import():
    code = ("import numfuse.memory as m, unittest.mock as u\n"
            "calls = []\n"
            "with u.patch.object(m, 'retain_freed_memory', lambda: calls.append(1)):\n"
            "    m._from_environment()\n"
            "print(len(calls))\n")
    for value, expected in (("1", "1"), ("0", "0")):
        env = {**os.environ, "NUMFUSE_RETAIN_MEMORY": value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
        assert out == expected
