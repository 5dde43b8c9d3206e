"""The disk cache of compiled kernels: where it is, how big, and clearing it.

Compiled kernels persist across processes in ``<root>/kernels/<key>/``, where ``root`` is
``NUMFUSE_CACHE_DIR`` or the user cache directory (``platformdirs``) and ``key`` is a hash
of everything besides a kernel's source that decides its machine code (numba, llvmlite,
numpy and Python versions, numfuse's version and kernel library, the CPU, code-changing
settings).  A process uses one key directory; the others are *stale*: left by other
versions or settings, never read by this process.  ``numfuse.jit(fn, cache=False)`` keeps a
function's kernels out of the cache.

>>> import numfuse
>>> numfuse.cache.info()        # doctest: +SKIP
<numfuse cache /home/me/.cache/numfuse/kernels: 12 kernels, 1.3 MB; no stale directories>
>>> numfuse.cache.clear()       # doctest: +SKIP

From a shell: ``python -m numfuse.cache info`` or ``python -m numfuse.cache clear``.
This module only reports and removes; ``backend.store`` decides the paths.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from ..backend import store
from ..backend.store import CacheWarning

__all__ = ["CacheInfo", "CacheWarning", "clear", "info"]


@dataclasses.dataclass(frozen=True)
class CacheInfo:
    """What the disk cache holds.

    ``directory`` holds every key directory; ``current`` is this process's.  ``kernels``
    counts the complete entries in ``current`` and ``size`` its bytes; ``stale`` counts
    the other key directories and ``stale_size`` their bytes.
    """

    directory: Path
    current: Path
    kernels: int
    size: int
    stale: int
    stale_size: int

    def __repr__(self) -> str:
        stale = (f"{self.stale} stale director{'y' if self.stale == 1 else 'ies'} "
                 f"({_readable(self.stale_size)})" if self.stale else "no stale directories")
        return (f"<numfuse cache {self.directory}: {self.kernels} "
                f"kernel{'' if self.kernels == 1 else 's'}, {_readable(self.size)}; {stale}>")


def _readable(size: int) -> str:
    amount = float(size)
    for unit in ("bytes", "kB", "MB", "GB"):
        if amount < 1000 or unit == "GB":
            return f"{size} bytes" if unit == "bytes" else f"{amount:.1f} {unit}"
        amount /= 1000
    raise AssertionError("unreachable")


def _size(directory: Path) -> int:
    total = 0
    for path in directory.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:  # removed meanwhile by another process
            pass
    return total


def _key_directories() -> tuple[Path, Path, list[Path]]:
    """The kernels directory, this process's key directory and the stale ones."""
    current = store.cache_directory()
    directory = current.parent
    try:
        stale = sorted(path for path in directory.iterdir()
                       if path.is_dir() and path != current)
    except OSError:
        stale = []
    return directory, current, stale


def info() -> CacheInfo:
    """The cache's location, kernel count and size (nothing is created or changed)."""
    directory, current, stale = _key_directories()
    kernels = len(list(current.glob("*.nfk"))) if current.is_dir() else 0
    return CacheInfo(directory, current, kernels, _size(current) if current.is_dir() else 0,
                     len(stale), sum(_size(path) for path in stale))


def clear(*, stale_only: bool = False) -> int:
    """Remove the cached kernels (only other versions' and settings' with ``stale_only``);
    returns the bytes freed.

    Kernels already loaded keep working; a process compiling into the cache at the same
    moment may leave entries behind, which are checked like any other."""
    _, current, stale = _key_directories()
    removed = stale if stale_only else [*stale, current]
    freed = 0
    for path in removed:
        if path.is_dir():
            freed += _size(path)
            shutil.rmtree(path, ignore_errors=True)
    store.reset_cache_settings()
    return freed
