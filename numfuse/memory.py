"""Memory for result arrays: a bounded pool of reused blocks, and glibc's freed-memory setting.

A kernel writing into a *new* 8 MB array spends most of its time on the page faults of the
first touch: glibc's malloc returns large freed blocks to the operating system at once
(``munmap``), so every call maps and faults in new pages.  Measured here on a 1e6-element
logp/grad: 2.4 ms into fresh arrays, 0.36 ms into reused ones.

**The pool** (on by default) keeps the blocks of large kernel outputs for reuse, as the
caching allocators of JAX and PyTorch do.  ``empty`` hands out an ordinary ndarray made
on a block's memory mapping, its ``.base``; views reference it or the array, so the
mapping has more references than the block's own exactly while an array on it lives.
The pool looks (``_Block.lent``) instead of being told: an allocation takes a free block
of its size class, else a lent block of the class whose arrays are gone (a reference
count, no finaliser; the newest such lease first: the memory last written, still in the
caches), else maps a new one — so a block is never handed out
while anything references it.  Blocks are private anonymous memory mappings
(page-aligned; a forked child's are its own copies) in size classes (at most 1/8 larger
than asked); arrays smaller than ``min_bytes`` come from numpy's allocator as usual
(with glibc, whose heap is made to serve blocks up to ``HEAP_BYTES`` at import, that is
the default ``min_bytes``: see ``_heap_serves``; elsewhere 256 KiB).
The pool keeps at most ``limit`` bytes of free blocks (default: 1/8 of the RAM, at most
2 GiB), releases free blocks unused for ``idle_seconds`` or passed over by
``idle_allocations`` allocations (a daemon thread watches while the pool holds blocks),
releases them all before retrying a mapping that failed (failing again, the array comes
from numpy's allocator, as do those of the next few hundred allocations: the system
bounds the number of mappings), and gives free blocks back first when a new one would
take its footprint over the limit.  ``pool()`` reads and
changes the settings (``NUMFUSE_MEMORY_POOL=0`` turns it off,
``NUMFUSE_MEMORY_POOL_LIMIT=512M`` bounds it, both read at import); ``pool_stats()``
reports it; ``release_pool()`` empties it.  A pickled result unpickles to an ordinary
array.

**``retain_freed_memory()``** instead asks glibc to keep freed blocks: allocations up to
``limit`` bytes come from the heap and freed memory is not trimmed back to the system.  It
is process-wide (it helps numpy as much) and the process's resident memory then stays at
its peak, so it is opt-in: call it, or set ``NUMFUSE_RETAIN_MEMORY=1`` before importing
numfuse.  Elsewhere than glibc it does nothing and returns False.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import dataclasses
import gc
import math
import mmap
import os
import sys
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
_RECLAIM_SCAN = 8  # lent blocks an allocation looks at, at most, before it maps a new one
_RECENT_SCAN = 4  # newest lent blocks an allocation looks at first for one to lend again
_UNMAPPABLE_FOR = 256  # allocations from numpy's allocator after a mapping failed twice
_PRIVATE = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}
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
    # Smaller arrays come from numpy's allocator: glibc serves blocks this small from its
    # heap, and a lease costs a few hundred nanoseconds more than its allocation.  From
    # 256 KiB glibc maps and unmaps blocks (or trims its heap) on every call unless a
    # larger block was freed before: a 1e5-element logp/grad took 4-8x as long into
    # glibc's memory as into the pool's, in a process that had not freed a larger block.
    # Where glibc has freed one of ``HEAP_BYTES`` (``_default_settings`` makes sure), its
    # heap serves blocks up to that size without new pages, from memory numpy's own
    # arrays just left, still in the caches: the pool takes the larger ones only.
    min_bytes: int = 256 << 10
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
    so 64-byte-aligned; private, so a forked child's copy never shares its pages with the
    parent's); ``returned`` and ``tick`` are when the pool last found it free (time and
    allocation count).  Every array on the block references the mapping, directly (the
    one made on it) or through other arrays (its views), so the block is lent exactly
    while the mapping has more references than the block's own (``lent``)."""

    __slots__ = ("mapping", "returned", "size", "tick")

    def __init__(self, size: int) -> None:
        self.mapping = mmap.mmap(-1, size, **_PRIVATE)
        if size >= _HUGE_PAGES_FROM and hasattr(mmap, "MADV_HUGEPAGE"):
            self.mapping.madvise(mmap.MADV_HUGEPAGE)  # as numpy does for large arrays
        self.size = size
        self.returned = 0.0
        self.tick = 0

    def lent(self) -> bool:
        return sys.getrefcount(self.mapping) > _UNREFERENCED


def _again(lent: collections.deque[_Block]) -> _Block | None:
    """The newest of the ``_RECENT_SCAN`` newest leases of ``lent`` (a class's leases,
    oldest first) whose arrays are gone, moved to the newest end, or None: the memory last
    written, likeliest still in the caches (the results of a call dropped before the next
    one, or those of the call before when each call's results live until the next has
    returned), preferred to the blocks found free earlier."""
    for index in range(-1, -1 - min(_RECENT_SCAN, len(lent)), -1):
        block = lent[index]
        if not block.lent():
            if index != -1:
                del lent[index]
                lent.append(block)
            return block
    return None


class _Pool:
    """Blocks by size class: free ones (``free``, and all of them in the order the pool
    found them free, oldest first, in ``order``) and lent ones (``lent``, oldest lease
    first), under one lock.  A lent block is found free again by looking (``_reclaim``):
    when an allocation of its size class finds no free block, at a miss (every class),
    and when the pool reports or trims itself.  No finaliser runs when an array goes, so
    nothing ever runs inside the pool behind its lock's back."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._reset_locks()
        self.free: dict[int, list[_Block]] = {}
        self.order: dict[_Block, None] = {}
        self.lent: dict[int, collections.deque[_Block]] = {}
        self.cached = 0
        self.leased = 0
        self.leased_blocks = 0
        self.hits = 0
        self.misses = 0
        self.released = 0
        self.ticks = 0
        self.unmappable_until = 0  # no block is mapped before this allocation count

    def _reset_locks(self) -> None:
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.trimmer: threading.Thread | None = None

    def configure(self, settings: PoolSettings) -> None:
        with self.lock:
            self.settings = settings
            self._reclaim_all()
            self._shrink(settings.limit if settings.enabled else 0)
            self._expire(time.monotonic())
        self.wake.set()

    def release(self) -> int:
        with self.lock:
            self._reclaim_all()
            before = self.released
            self._shrink(0)
            return self.released - before

    def stats(self) -> PoolStats:
        with self.lock:
            self._reclaim_all()
            return PoolStats(self.settings.enabled, self.settings.limit, self.cached,
                             len(self.order), self.leased, self.leased_blocks, self.hits,
                             self.misses, self.released)

    # everything below runs under the lock

    def _take(self, size: int) -> _Block | None:
        self.ticks += 1
        if not self.ticks % _EXPIRY_EVERY:
            self._expire(time.monotonic())
        lent = self.lent.get(size)
        if lent is None:
            lent = self.lent[size] = collections.deque()
        else:
            # the common case, a recent lease whose arrays are gone: lent again at once
            again = _again(lent)
            if again is not None:
                self.hits += 1
                return again
        block = self._free_block(size)
        if block is not None:
            self.hits += 1
        else:
            self.misses += 1
            self._reclaim_all()
            self._expire(time.monotonic())
            # the pool's footprint stays within its limit as far as free blocks allow
            self._shrink(self.settings.limit - self.leased - size)
            block = self._new_block(size)
            if block is None:
                return None
        self.leased += size
        self.leased_blocks += 1
        lent.append(block)
        if self.trimmer is None:
            self._start_trimmer()
        return block

    def _free_block(self, size: int) -> _Block | None:
        """A free block of ``size`` bytes taken out of the free blocks — the most recently
        found free (likeliest still in cache) —, looking among the oldest
        ``_RECLAIM_SCAN`` lent ones of the class when none is known to be free."""
        blocks = self.free.get(size)
        if not blocks:
            self._reclaim(size, _RECLAIM_SCAN)
            blocks = self.free.get(size)
            if not blocks:
                return None
        block = blocks.pop()
        del self.order[block]
        self.cached -= size
        return block

    def _reclaim(self, size: int, most: int) -> None:
        """Look at up to ``most`` of the lent blocks of ``size`` bytes, oldest first,
        taking back those no array references any more."""
        lent = self.lent.get(size)
        if not lent:
            return
        for _ in range(min(most, len(lent))):
            block = lent.popleft()
            if block.lent():
                lent.append(block)
            else:
                self._put(block)

    def _reclaim_all(self) -> None:
        for size, lent in list(self.lent.items()):
            self._reclaim(size, len(lent))

    def _new_block(self, size: int) -> _Block | None:
        """A new block, or None when mapping one fails twice (out of memory, or of
        mappings: the system bounds their number, ``vm.max_map_count``); the pool then
        maps none for its next ``_UNMAPPABLE_FOR`` allocations, which come from numpy's
        allocator."""
        if self.ticks < self.unmappable_until:
            return None
        try:
            return _Block(size)
        except (MemoryError, OSError):
            self._shrink(0)
            gc.collect()  # arrays in reference cycles may hold blocks
            self._reclaim_all()
            self._shrink(0)
        try:
            return _Block(size)
        except (MemoryError, OSError):
            self.unmappable_until = self.ticks + _UNMAPPABLE_FOR
            return None

    def _put(self, block: _Block) -> None:
        """A block no array references any more: free (or released, if the pool is off
        or the block larger than its limit)."""
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
        pool holds any block, taking back the blocks of arrays gone and releasing free
        ones once idle."""
        self.trimmer = threading.Thread(target=self._trim, name="numfuse-pool-trimmer",
                                        daemon=True)
        self.trimmer.start()

    def _trim(self) -> None:
        wait = self.settings.idle_seconds
        while True:
            self.wake.wait(wait)
            self.wake.clear()
            with self.lock:
                self._reclaim_all()
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
        self._reset_locks()


def _default_settings() -> PoolSettings:
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 16 << 30
    settings = PoolSettings(limit=min(memory // 8, 2 << 30))
    if _heap_serves(HEAP_BYTES):
        settings = dataclasses.replace(settings, min_bytes=HEAP_BYTES)
    return settings


# Blocks glibc serves from its heap once one this large was mapped and freed: just under
# its largest dynamic threshold (DEFAULT_MMAP_THRESHOLD_MAX, 32 MiB on 64-bit systems),
# which a mapped block's size with its header must not exceed.
HEAP_BYTES = (32 << 20) - (64 << 10)


def _heap_serves(nbytes: int) -> bool:
    """Make glibc serve blocks up to ``nbytes`` from its heap, as it does once the process
    has freed a mapped block that large (numpy's temporaries do it in most programs):
    malloc and free one.  Measured in a benchmark interleaving other libraries, logp/grad
    at 1e5: 2.0x numpy into the pool's blocks, 2.8-3.0x into the heap's.  False where the
    C library is not glibc (nothing is done), or where glibc still maps such blocks (its
    thresholds set by the environment: ``MALLOC_TRIM_THRESHOLD_``)."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc's own function: glibc's rules)
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        libc.sbrk.restype = ctypes.c_void_p
        libc.sbrk.argtypes = [ctypes.c_ssize_t]
    except (OSError, AttributeError, TypeError):
        return False
    block = libc.malloc(nbytes)
    if not block:
        return False
    libc.free(block)
    # whether glibc now takes such blocks from its heap (below its end): not where its
    # thresholds are set (MALLOC_TRIM_THRESHOLD_ and the like, as dask's workers have
    # them, or mallopt), which keeps it mapping and unmapping them: the pool serves them
    probe = libc.malloc(1 << 20)
    heap = bool(probe) and probe < (libc.sbrk(0) or 0)
    libc.free(probe)
    return heap




def _references_unlent() -> int:
    """The references of a block's mapping when no array is on it (the block's, and
    ``sys.getrefcount``'s argument's), counted as ``_Block.lent`` counts them."""
    block = _Block(1 << 12)
    return sys.getrefcount(block.mapping)


_UNREFERENCED = _references_unlent()
_pool = _Pool(_default_settings())
# The fewest elements of the arrays callers take from ``empty`` (a cheap test on a loop's
# length, made before working out exact shapes and dtypes; none when the pool is off):
# ``min_bytes`` over float64's 8 bytes.  Shorter arrays of wider elements (complex128)
# come from numpy's allocator.
_POOLED_ELEMENT = 8


def _elements_floor(settings: PoolSettings) -> int:
    return -(-settings.min_bytes // _POOLED_ELEMENT) if settings.enabled else 1 << 62


pooled_from = _elements_floor(_pool.settings)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.after_fork)


def empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """A new uninitialised C-contiguous array: from the pool when it is on and the array
    is large enough (``PoolSettings.min_bytes``), else from numpy's allocator."""
    try:
        size = _sizes[shape, dtype]  # type: ignore[index]
    except (KeyError, TypeError):  # a new shape and dtype, or a shape given as a list
        shape, dtype = tuple(shape), np.dtype(dtype)
        size = _size_of(shape, dtype, _pool.settings)
        if len(_sizes) >= _SIZES_KEPT:
            _sizes.clear()
        _sizes[shape, dtype] = size
    if not size:
        return np.empty(shape, dtype)
    with _pool.lock:
        block = _pool._take(size)
        if block is not None:
            # made under the lock: until the array references the mapping, the block
            # looks free to another thread's allocation (or the trimmer), which would lend
            # it a second time
            return np.ndarray(shape, dtype, block.mapping)
    return np.empty(shape, dtype)  # no block could be mapped


def _size_of(shape: tuple[int, ...], dtype: np.dtype, settings: PoolSettings) -> int:
    """The size class of the block an array of ``shape`` and ``dtype`` takes from the
    pool, or 0 when it comes from numpy's allocator."""
    nbytes = math.prod(shape) * dtype.itemsize
    if not settings.enabled or nbytes < settings.min_bytes or nbytes > settings.limit or \
            dtype.kind not in "biufc":
        return 0
    return size_class(nbytes)


# ``_size_of`` for the (shape, dtype) of the arrays ``empty`` made lately (their calls
# repeat: the cost of working it out was a third of a lease); emptied when the settings
# change.
_sizes: dict[tuple[Any, Any], int] = {}
_SIZES_KEPT = 1024


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
        _sizes.clear()
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
