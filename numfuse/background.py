"""Compiling in the background: one worker thread builds the kernels of functions jitted
with ``background=True`` while their calls run with numpy.

numba's LLVM code generator compiles one module at a time in a process (a global lock), so
one worker is as fast as several.  Compiles queued when the interpreter exits are
cancelled; one under way finishes first (its disk-cache entry is written atomically).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar("_T")
_executor: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def submit(work: Callable[[], _T]) -> Future[_T]:
    """Run ``work()`` on the compile thread; its result (or exception) in the future."""
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="numfuse-compile")
            atexit.register(_shutdown)
        return _executor.submit(work)


def _forget_executor() -> None:
    """In a forked child: the parent's compile thread is not there; a new one is made."""
    global _executor, _lock
    _executor, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_executor)


def _shutdown() -> None:
    executor = _executor
    if executor is not None:
        executor.shutdown(wait=True, cancel_futures=True)


def default() -> bool:
    """``NUMFUSE_BACKGROUND``: ``1``/``true``/``on``/``yes`` make background compiles the
    default of ``numfuse.jit`` (read at each ``jit`` call)."""
    value = os.environ.get("NUMFUSE_BACKGROUND", "").strip().lower()
    return value in ("1", "true", "on", "yes")
