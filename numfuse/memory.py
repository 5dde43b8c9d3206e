"""Memory for result arrays: a bounded pool of reused blocks, and glibc's freed-memory setting.

A kernel writing into a *new* 8 MB array spends most of its time on the page faults of the
first touch: glibc's malloc returns large freed blocks to the operating system at once
(``munmap``), so every call maps and faults in new pages.  Measured here on a 1e6-element
logp/grad: 2.4 ms into fresh arrays, 0.36 ms into reused ones.

**The pool** (on by default) keeps the blocks of large kernel outputs for reuse, as the
caching allocators of JAX and PyTorch do.  ``empty`` hands out an ordinary ndarray whose
``.base`` is a ``_Lease`` holding its block; views keep their base alive, so the block
comes back to the pool only when the array and every view of it are gone (the lease's
``__del__``), and is never handed out while anything references it.  Blocks are
anonymous memory mappings (page-aligned) in size classes (at most 1/8 larger than asked);
arrays smaller than ``min_bytes`` come from numpy's allocator as usual (glibc reuses
freed memory of that size without new page faults).  The pool keeps at most ``limit``
bytes of free blocks (default: 1/8 of the RAM, at most 2 GiB), releases free blocks
unused for ``idle_seconds`` or passed over by ``idle_allocations`` allocations (a daemon
thread watches while the pool holds blocks), releases them all before retrying a mapping
that failed, and gives free blocks back first when a new one would take its footprint
over the limit.  ``pool()`` reads and changes the settings (``NUMFUSE_MEMORY_POOL=0``
turns it off, ``NUMFUSE_MEMORY_POOL_LIMIT=512M`` bounds it, both read at import);
``pool_stats()`` reports it; ``release_pool()`` empties it.  A pickled result unpickles
to an ordinary array; a forked child keeps its parent's blocks.

**``retain_freed_memory()``** instead asks glibc to keep freed blocks: allocations up to
``limit`` bytes come from the heap and freed memory is not trimmed back to the system.  It
is process-wide (it helps numpy as much) and the process's resident memory then stays at
its peak, so it is opt-in: call it, or set ``NUMFUSE_RETAIN_MEMORY=1`` before importing
numfuse.  Elsewhere than glibc it does nothing and returns False.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import ctypes.util
import dataclasses
import gc
import math
import mmap
import os
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_HUGE_PAGES_FROM = 4 << 20  # bytes: blocks this large ask for transparent huge pages
_EXPIRY_EVERY = 16  # allocations between checks for blocks left unused too long
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def retain_freed_memory(limit: int = 1 << 30) -> bool:
    """Keep freed blocks up to ``limit`` bytes in the process for reuse (glibc only).

    Returns True when glibc accepted the settings.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    limit = max(0, min(int(limit), 2**31 - 1))
    return bool(mallopt(_M_MMAP_THRESHOLD, limit)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, min(2 * limit, 2**31 - 1)))


# ------------------------------------------------------------------------ the pool


@dataclasses.dataclass(frozen=True)
class PoolSettings:
    """How the pool behaves (see the module docstring); ``pool()`` changes them."""

    enabled: bool = True
    limit: int = 2 << 30  # bytes of free blocks kept at most
    # Smaller arrays come from numpy's allocator: glibc reuses freed blocks up to 32 MiB
    # (its mmap threshold rises to the size of the largest block freed), and pooled blocks,
    # all page-aligned, ran slower than glibc's at 1e5-1e6 elements in the benchmark suite
    # (probably inputs and outputs at equal page offsets aliasing in the store buffer).
    min_bytes: int = 32 << 20
    idle_seconds: float = 10.0  # a free block unused this long is released
    idle_allocations: int = 256  # ... or passed over by this many pool allocations


@dataclasses.dataclass(frozen=True)
class PoolStats:
    """A snapshot of the pool: blocks free in it (``cached``) and held by arrays
    (``leased``), allocations served by a free block (``hits``) or a new one
    (``misses``), and bytes given back to the system since the process started."""

    enabled: bool
    limit: int
    cached_bytes: int
    cached_blocks: int
    leased_bytes: int
    leased_blocks: int
    hits: int
    misses: int
    released_bytes: int


def size_class(nbytes: int) -> int:
    """The block size serving ``nbytes``: a whole number of pages, rounded up to a step
    of 1/8 to 1/16 of the size, so repeated calls of one size meet the same class and a
    block wastes at most an eighth of itself."""
    step = 1 << max(12, nbytes.bit_length() - 4)
    return -(-nbytes // step) * step


class _Block:
    """A block of memory: an anonymous private mapping of ``size`` bytes (page-aligned,
    so 64-byte-aligned; not an ndarray, so arrays made on it keep their lease as their
    base); ``returned`` and ``tick`` are when it last came back to the pool (time and
    allocation count)."""

    __slots__ = ("mapping", "returned", "size", "tick")

    def __init__(self, size: int) -> None:
        self.mapping = mmap.mmap(-1, size)
        if size >= _HUGE_PAGES_FROM and hasattr(mmap, "MADV_HUGEPAGE"):
            self.mapping.madvise(mmap.MADV_HUGEPAGE)  # as numpy does for large arrays
        self.size = size
        self.returned = 0.0
        self.tick = 0


class _Lease(np.ndarray):
    """The array an array handed out by the pool is a view of (its ``base``), holding
    the block lent to it: collected once that array and all its views are gone, it gives
    the block back (``__del__``).  Its own base is the block's mapping, not an ndarray,
    so numpy never skips it when it links a view to the memory's owner."""

    __slots__ = ("block",)
    block: _Block

    def __del__(self) -> None:
        # at interpreter shutdown there may be no pool left to give the block back to
        with contextlib.suppress(Exception):
            _pool.give_back(self.block)


class _Pool:
    """Free blocks by size class and in the order they came back (oldest first), under
    one lock.  A block coming back while the lock is taken (by another thread, or by
    this one when the garbage collector runs a lease's ``__del__`` inside the pool)
    waits in ``pending`` until the next holder of the lock takes it in."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._reset_locks()
        self.free: dict[int, list[_Block]] = {}
        self.order: dict[_Block, None] = {}
        self.cached = 0
        self.leased = 0
        self.leased_blocks = 0
        self.hits = 0
        self.misses = 0
        self.released = 0
        self.ticks = 0

    def _reset_locks(self) -> None:
        self.lock = threading.Lock()
        self.pending: collections.deque[_Block] = collections.deque()
        self.wake = threading.Event()
        self.trimmer: threading.Thread | None = None

    def lease(self, shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> np.ndarray:
        with self.lock:
            block = self._take(size_class(nbytes))
        lease = np.ndarray.__new__(_Lease, shape, dtype, block.mapping)
        lease.block = block
        return lease.view(np.ndarray)

    def give_back(self, block: _Block) -> None:
        if not self.lock.acquire(blocking=False):
            self.pending.append(block)
            return
        try:
            self._put(block)
        finally:
            self.lock.release()

    def configure(self, settings: PoolSettings) -> None:
        with self.lock:
            self.settings = settings
            self._take_pending()
            self._shrink(settings.limit if settings.enabled else 0)
            self._expire(time.monotonic())
        self.wake.set()

    def release(self) -> int:
        with self.lock:
            self._take_pending()
            before = self.released
            self._shrink(0)
            return self.released - before

    def stats(self) -> PoolStats:
        with self.lock:
            self._take_pending()
            return PoolStats(self.settings.enabled, self.settings.limit, self.cached,
                             len(self.order), self.leased, self.leased_blocks, self.hits,
                             self.misses, self.released)

    # everything below runs under the lock

    def _take(self, size: int) -> _Block:
        if self.pending:
            self._take_pending()
        self.ticks += 1
        blocks = self.free.get(size)
        if blocks:
            block = blocks.pop()  # the most recently returned: likeliest still in cache
            del self.order[block]
            self.cached -= size
            self.hits += 1
        else:
            self.misses += 1
            self._expire(time.monotonic())
            # the pool's footprint stays within its limit as far as free blocks allow
            self._shrink(self.settings.limit - self.leased - size)
            block = self._new_block(size)
        if not self.ticks % _EXPIRY_EVERY:
            self._expire(time.monotonic())
        self.leased += size
        self.leased_blocks += 1
        if self.trimmer is None:
            self._start_trimmer()
        return block

    def _new_block(self, size: int) -> _Block:
        try:
            return _Block(size)
        except (MemoryError, OSError):
            self._shrink(0)
            gc.collect()  # arrays in reference cycles may hold blocks
            self._take_pending()
            self._shrink(0)
        try:
            return _Block(size)
        except (MemoryError, OSError) as error:
            raise MemoryError(f"numfuse's memory pool could not map {size} bytes for a "
                              f"result ({error}); free memory, or use out= arrays") from None

    def _put(self, block: _Block) -> None:
        self.leased -= block.size
        self.leased_blocks -= 1
        settings = self.settings
        if not settings.enabled or block.size > settings.limit:
            self.released += block.size
            return
        block.returned = time.monotonic()
        block.tick = self.ticks
        self.free.setdefault(block.size, []).append(block)
        self.order[block] = None
        self.cached += block.size
        if self.cached > settings.limit:
            self._shrink(settings.limit)

    def _take_pending(self) -> None:
        while self.pending:
            self._put(self.pending.popleft())

    def _shrink(self, cached: int) -> None:
        """Release free blocks, oldest first, until at most ``cached`` bytes are free."""
        while self.order and self.cached > cached:
            self._release(next(iter(self.order)))

    def _expire(self, now: float) -> None:
        """Release the free blocks left unused too long (in time or allocations)."""
        settings = self.settings
        while self.order:
            oldest = next(iter(self.order))
            if now - oldest.returned < settings.idle_seconds and \
                    self.ticks - oldest.tick < settings.idle_allocations:
                return
            self._release(oldest)

    def _release(self, block: _Block) -> None:
        del self.order[block]
        self.free[block.size].remove(block)
        self.cached -= block.size
        self.released += block.size  # unmapped when the block is collected, now

    def _start_trimmer(self) -> None:
        """Free blocks must go even when no call comes: a daemon thread runs while the
        pool holds any block, releasing them once idle."""
        self.trimmer = threading.Thread(target=self._trim, name="numfuse-pool-trimmer",
                                        daemon=True)
        self.trimmer.start()

    def _trim(self) -> None:
        wait = self.settings.idle_seconds
        while True:
            self.wake.wait(wait)
            self.wake.clear()
            with self.lock:
                self._take_pending()
                now = time.monotonic()
                self._expire(now)
                if not self.order and not self.leased_blocks:
                    self.trimmer = None
                    return
                wait = self.settings.idle_seconds
                if self.order:
                    wait = next(iter(self.order)).returned + wait - now
                wait = max(wait, 0.01)

    def after_fork(self) -> None:
        """In a forked child: fresh locks and no trimmer thread (it was not copied)."""
        blocks = list(self.pending)
        self._reset_locks()
        for block in blocks:
            self._put(block)


def _default_settings() -> PoolSettings:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 16 << 30
    return PoolSettings(limit=min(memory // 8, 2 << 30))


_pool = _Pool(_default_settings())
# The fewest elements of an array ``empty`` may take from the pool (none when it is off):
# ``min_bytes`` over the widest element (complex128), a cheap test callers make on a
# loop's length before working out exact shapes and dtypes.
_WIDEST_ELEMENT = 16


def _elements_floor(settings: PoolSettings) -> int:
    return -(-settings.min_bytes // _WIDEST_ELEMENT) if settings.enabled else 1 << 62


pooled_from = _elements_floor(_pool.settings)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.after_fork)


def empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """A new uninitialised C-contiguous array: from the pool when it is on and the array
    is large enough (``PoolSettings.min_bytes``), else from numpy's allocator."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    settings = _pool.settings
    if not settings.enabled or nbytes < settings.min_bytes or nbytes > settings.limit or \
            dtype.kind not in "biufc":
        return np.empty(shape, dtype)
    return _pool.lease(shape, dtype, nbytes)


def pool(*, enabled: bool | None = None, limit: int | None = None,
         min_bytes: int | None = None, idle_seconds: float | None = None,
         idle_allocations: int | None = None) -> PoolSettings:
    """Change the pool's settings (those given) and return the settings in force.

    ``enabled=False`` releases the free blocks and stops pooling (arrays already handed
    out release theirs when they go); ``limit`` bounds the bytes of free blocks kept;
    arrays under ``min_bytes`` are left to numpy; free blocks unused for
    ``idle_seconds`` or passed over by ``idle_allocations`` allocations are released.
    """
    global pooled_from
    changes: dict[str, Any] = {}
    if enabled is not None:
        if not isinstance(enabled, bool):
            raise TypeError(f"pool(enabled=...) takes True or False, not {enabled!r}")
        changes["enabled"] = enabled
    for name, value, low in (("limit", limit, 0), ("min_bytes", min_bytes, 0),
                             ("idle_allocations", idle_allocations, 1)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"pool({name}=...) takes a whole number of "
                             f"{'bytes' if low == 0 else 'allocations'} >= {low}, "
                             f"not {value!r}")
        changes[name] = int(value)
    if idle_seconds is not None:
        if isinstance(idle_seconds, bool) or not isinstance(idle_seconds, (int, float)) or \
                not idle_seconds > 0:
            raise ValueError(f"pool(idle_seconds=...) takes a number of seconds > 0, "
                             f"not {idle_seconds!r}")
        changes["idle_seconds"] = float(idle_seconds)
    if changes:
        settings = dataclasses.replace(_pool.settings, **changes)
        _pool.configure(settings)
        pooled_from = _elements_floor(settings)
    return _pool.settings


def pool_stats() -> PoolStats:
    """What the pool holds now and how it has served allocations."""
    return _pool.stats()


def release_pool() -> int:
    """Give every free block of the pool back to the system; returns the bytes released.
    Arrays handed out keep their blocks."""
    return _pool.release()


def parse_bytes(text: str) -> int:
    """A byte count written as ``123``, ``512K``, ``64M`` or ``2G`` (powers of 1024)."""
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(cleaned[-1:], 1)
    digits = cleaned[:-1] if scale > 1 else cleaned
    try:
        value = float(digits)
    except ValueError:
        raise ValueError(f"{text!r} is not a byte count: write e.g. 1073741824, 512M or "
                         "2G") from None
    if not value >= 0 or math.isinf(value):
        raise ValueError(f"{text!r} is not a byte count >= 0")
    return int(value * scale)


def _from_environment() -> None:
    """Apply ``NUMFUSE_RETAIN_MEMORY``, ``NUMFUSE_MEMORY_POOL`` and
    ``NUMFUSE_MEMORY_POOL_LIMIT`` (a bad value is warned about and ignored)."""
    if os.environ.get("NUMFUSE_RETAIN_MEMORY", "").strip().lower() in _TRUE:
        retain_freed_memory()
    switch = os.environ.get("NUMFUSE_MEMORY_POOL", "").strip().lower()
    if switch in _FALSE:
        pool(enabled=False)
    elif switch and switch not in _TRUE:
        warnings.warn(f"NUMFUSE_MEMORY_POOL={switch!r} ignored: set it to 0 (off) or 1 (on)",
                      RuntimeWarning, stacklevel=2)
    limit = os.environ.get("NUMFUSE_MEMORY_POOL_LIMIT", "").strip()
    if limit:
        try:
            pool(limit=parse_bytes(limit))
        except ValueError as error:
            warnings.warn(f"NUMFUSE_MEMORY_POOL_LIMIT ignored: {error}", RuntimeWarning,
                          stacklevel=2)
