"""Waiting for another thread without the GIL and without sleeping: a native spin.

Waking a thread that sleeps (a lock, a condition, the GIL) costs a system call in the
waker and a wake-up in the sleeper: 20-40 µs each on the virtual machines measured, where
an idle virtual CPU halts.  A large kernel call of about 100 µs per thread cannot pay that
twice.  The threads running its chunks (``threads.py``) therefore wait for each other
on a word of memory, spinning in native code with the GIL released (a ctypes call), for a
bounded time only, and fall back to sleeping after it.

``spinner()`` compiles the spin once per process with llvmlite (an atomic load and the
CPU's spin-wait hint in a loop) and calibrates how long one turn takes; it is None where
that fails, and callers then only sleep.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
import time
from typing import Any

import llvmlite.binding as llvm
import numpy as np

# The CPU's hint that a thread is spinning (it yields the core's shared resources).
_X86 = ("declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()")
_ARM = ("declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)")
_HINTS = {"x86_64": _X86, "amd64": _X86, "aarch64": _ARM, "arm64": _ARM}

# spin(word, seen, turns, grace, bump): add 1 to ``*bump`` unless it is null, then load
# ``*word`` (atomically, acquire) until it differs from ``seen`` or ``turns`` turns have
# passed; once it differs, spin ``grace`` turns more (see ``Spinner.until_changed``).
# Returns the last value loaded.
_IR = """
{declare}
define i64 @numfuse_spin(i64* %word, i64 %seen, i64 %turns, i64 %grace, i64* %bump)
    nounwind {{
entry:
  %bumping = icmp ne i64* %bump, null
  br i1 %bumping, label %add, label %loop
add:
  %before = atomicrmw add i64* %bump, i64 1 seq_cst
  br label %loop
loop:
  %turn = phi i64 [0, %entry], [0, %add], [%next, %again]
  %value = load atomic i64, i64* %word acquire, align 8
  %changed = icmp ne i64 %value, %seen
  br i1 %changed, label %linger, label %again
again:
  {hint}
  %next = add i64 %turn, 1
  %more = icmp ult i64 %next, %turns
  br i1 %more, label %loop, label %done
linger:
  %extra = phi i64 [0, %loop], [%extra_next, %linger_again]
  %lingering = icmp ult i64 %extra, %grace
  br i1 %lingering, label %linger_again, label %done
linger_again:
  {hint}
  %extra_next = add i64 %extra, 1
  br label %linger
done:
  ret i64 %value
}}
"""


class Spinner:
    """The compiled spin and its speed: ``seconds_per_turn``."""

    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        declare, hint = _HINTS.get(platform.machine().lower(), ("", ""))
        module = llvm.parse_assembly(_IR.format(declare=declare, hint=hint))
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(opt=2)
        self._engine = llvm.create_mcjit_compiler(module, machine)  # keeps the code alive
        self._engine.finalize_object()
        address = self._engine.get_function_address("numfuse_spin")
        # a ctypes call releases the GIL for its duration
        self._spin = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_int64,
                                      ctypes.c_void_p)(address)
        still = np.zeros(1, np.int64)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            self._spin(still.ctypes.data, 0, 20_000, 0, None)
            best = min(best, (time.perf_counter() - start) / 20_000)
        self.seconds_per_turn = max(best, 1e-10)

    def turns(self, seconds: float) -> int:
        """How many turns of the spin take about ``seconds``."""
        return max(1, int(seconds / self.seconds_per_turn))

    def until_changed(self, words: np.ndarray[Any, Any], index: int, seen: int, turns: int,
                      grace: int, bump: int | None = None) -> int:
        """Spin, the GIL released, until ``words[index]`` (an int64 array's element)
        differs from ``seen`` or ``turns`` turns have passed; return its value then.
        Once it differs, spin ``grace`` turns more before taking the GIL back: the thread
        that changed it is still holding the GIL for a moment, and a thread that finds the
        GIL taken sleeps (and is woken slowly).  ``bump``: first add 1 to
        ``words[bump]``, once the GIL is released (a thread spinning on that word then
        knows this one no longer holds the GIL)."""
        base = words.ctypes.data
        return int(self._spin(base + index * words.itemsize, seen, turns, grace,
                              None if bump is None else base + bump * words.itemsize))


_lock = threading.Lock()
_spinner: Spinner | None = None
_failed = False
if hasattr(os, "register_at_fork"):  # a child never inherits the lock held
    os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release,
                        after_in_child=_lock.release)


def spinner() -> Spinner | None:
    """The process's ``Spinner``, built on first use; None where it cannot be built."""
    global _spinner, _failed
    with _lock:
        if _spinner is None and not _failed:
            try:
                _spinner = Spinner()
            except Exception:  # no native target, an unusual platform: sleep instead
                _failed = True
        return _spinner
