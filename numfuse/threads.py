"""Running one kernel call on several threads, and deciding when that pays.

numpy releases the GIL while a gufunc loop runs, so a large call can be cut into chunks
that threads run at the same time (numba's ``target="parallel"`` gufuncs were slower than
single-threaded ones on 2 cores).  Chunks are handed out one at a time from a shared
counter — the calling thread takes part — so a thread slowed by a busy core simply takes
fewer chunks instead of making everyone wait at a static split.

How many threads: the ``threads=`` option of ``jit``/``compile`` when given; otherwise
numba's setting (``numba.set_num_threads`` / ``NUMBA_NUM_THREADS``) when called from the
main thread, and one thread when called from any other thread (a thread pool, a dask
worker), so nested parallelism never oversubscribes the cores.

When: each kernel measures its cost per element on its own single-threaded calls (its
first large call always runs on one thread); a call is split only when its expected time
is well above the cost of handing out chunks, and only while splitting pays: each split
call compares its time with the single-threaded estimate, and when the gain falls below
``MIN_GAIN`` (the other cores are busy) the kernel stays on one thread, trying a split
again every ``RETRY_EVERY`` large calls in case the machine has become free.
"""

from __future__ import annotations

import contextvars
import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

# A split pays when the call would take this long on one thread (chunk hand-out and the
# extra gufunc calls cost some tens of microseconds).
PARALLEL_MIN_SECONDS = 200e-6
# Aim for chunks of about this much work, and at most this many chunks per thread.
CHUNK_SECONDS = 100e-6
CHUNKS_PER_THREAD = 4
MIN_CHUNK_ELEMENTS = 4096
# Splitting continues while (one-thread estimate) / (split time) stays at least this.
MIN_GAIN = 1.2
RETRY_EVERY = 16

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1),
                                       thread_name_prefix="numfuse")
        return _pool


def resolve(threads: int | None, default: Callable[[], int]) -> int:
    """The thread count for a call now (see the module docstring)."""
    if threads is not None:
        return max(1, int(threads))
    if threading.current_thread() is not threading.main_thread():
        return 1
    return max(1, default())


def chunk_count(seconds: float, elements: int, threads: int) -> int:
    """How many chunks to cut a call expected to take ``seconds`` into (1: do not split)."""
    if threads <= 1 or seconds < PARALLEL_MIN_SECONDS:
        return 1
    wanted = max(2, int(seconds / CHUNK_SECONDS))
    return max(1, min(wanted, CHUNKS_PER_THREAD * threads, elements // MIN_CHUNK_ELEMENTS))


def run_chunks(work: Callable[[int], None], count: int, threads: int) -> None:
    """Call ``work(0) … work(count - 1)`` on up to ``threads`` threads (this one included).

    Every thread runs in a copy of the caller's context, so ``np.errstate`` applies to
    all chunks; the first exception raised by any chunk is raised here.
    """
    counter = itertools.count()
    errors: list[BaseException] = []

    def drain() -> None:
        while not errors:
            index = next(counter)
            if index >= count:
                return
            try:
                work(index)
            except BaseException as error:  # re-raised in the calling thread
                errors.append(error)
                return

    helpers = min(threads, count) - 1
    pool = _executor() if helpers > 0 else None
    futures = [pool.submit(contextvars.copy_context().run, drain)
               for _ in range(helpers)] if pool is not None else []
    drain()
    for future in futures:
        if not future.cancel():  # a helper that never started has nothing to finish
            future.result()
    if errors:
        raise errors[0]
