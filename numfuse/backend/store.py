"""The disk cache of compiled kernels: where entries live, what names them, how they are
written, locked, read and checked.

A compiled kernel persists as one file, ``<kernel>.nfk`` in the kernel directory: a header
line, a JSON line (the kernel's name, its loop function's symbol, the sizes and the SHA-256
of what follows) and the object code the JIT engine loads, followed by the optimised
module's bitcode.  The file is written atomically (a rename); a file whose digest does not
match is reported by ``decode`` and the backend compiles the kernel again.  A per-kernel
file lock (``<kernel>.lock``) is held while a kernel is loaded or compiled, so processes
compiling the same kernel at once compile it once.

The kernel's name is a hash of its generated source, which fixes its statements.  What else
decides the machine code -- the lowering, helper and backend code, the numba, llvmlite,
numpy and Python versions, the numpy functions kernels may call (``numpy_loops``), the
CPU, code-changing settings -- is ``cache_key_material()``, whose hash names the kernel
directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import llvmlite
import numpy as np

from .. import kernel_lib, lowering, vector_math
from ..lowering import numpy_loops
from ..version import __version__
from . import numba_private

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

CACHE_FORMAT = 2  # bump when the layout of the cache directory changes
_MAGIC = b"NUMFUSE-KERNEL 2\n"

_checked: set[Path] = set()  # kernel directories found writable by this process
_warned: set[Path] = set()  # cache roots already warned about


class CacheWarning(RuntimeWarning):
    """The disk cache could not be used, or held a damaged entry that was compiled again."""


@dataclasses.dataclass(frozen=True)
class ObjectCode:
    """A kernel compiled for this machine, not yet loaded: the object code of its
    optimised module, that module's bitcode (for reading its IR and assembly) and the
    symbol of the gufunc's loop function."""

    name: str
    symbol: str
    object: bytes
    bitcode: bytes


# ------------------------------------------------------------------ where


@cache
def cache_root() -> Path:
    """``NUMFUSE_CACHE_DIR``, else the user cache directory (``platformdirs``) for numfuse.

    Read once per process; ``reset_cache_settings()`` reads it again."""
    configured = os.environ.get("NUMFUSE_CACHE_DIR")
    if configured:
        return Path(configured).expanduser().absolute()
    import platformdirs

    return Path(platformdirs.user_cache_dir("numfuse"))


def reset_cache_settings() -> None:
    """Read ``NUMFUSE_CACHE_DIR`` again at the next compile and warn again about an
    unusable directory (for tests, and programs that change the variable)."""
    cache_root.cache_clear()
    _checked.clear()
    _warned.clear()


def cache_directory() -> Path:
    """This process's kernel directory: ``<cache_root()>/kernels/<hash of the key>``."""
    key = json.dumps(cache_key_material(), sort_keys=True).encode()
    return cache_root() / "kernels" / hashlib.sha256(key).hexdigest()[:16]


def entry_path(directory: Path, name: str) -> Path:
    """The cache file of kernel ``name``."""
    return directory / f"{name}.nfk"


# ------------------------------------------------------------------ the key


def extra_key_material() -> dict[str, str]:
    """Process-wide settings outside the kernel source that change compiled kernels.

    Today: the vector-math mode and the digest of vector_math.py, whose functions the
    kernels inline.  Called at every compile: a setting changed at run time selects
    another directory."""
    return vector_math_key()


def vector_math_key() -> dict[str, str]:
    """The vector-math settings compiled kernels depend on: the mode (it changes the
    generated source, and so the kernel's name) and a digest of the functions' source
    (inlined into kernels, but not part of their source)."""
    source = Path(vector_math.__file__).read_bytes()
    return {"vector_math": "on" if vector_math.ENABLED else "off",
            "vector_math_source": hashlib.sha256(source).hexdigest()}


def _code_digest() -> str:
    """One digest of the modules whose code ends up in a kernel's machine code."""
    digest = hashlib.sha256()
    for package in (lowering.__file__, __file__):
        for path in sorted(Path(package).parent.glob("*.py")):
            digest.update(path.read_bytes())
    digest.update(Path(kernel_lib.__file__).read_bytes())
    return digest.hexdigest()


@cache
def _fixed_key_material() -> tuple[tuple[str, str], ...]:
    return (
        ("format", str(CACHE_FORMAT)),
        ("numfuse", __version__),
        ("code", _code_digest()),
        ("llvmlite", llvmlite.__version__),
        ("numpy", np.__version__),
        ("numpy functions", numpy_loops.key()),
        ("python", sys.implementation.cache_tag or sys.version),
        *numba_private.toolchain_key(),
    )


def cache_key_material() -> dict[str, str]:
    """All that decides a cached kernel's machine code besides its source; the kernel
    directory is named by its hash."""
    return {**dict(_fixed_key_material()), **extra_key_material()}


# ------------------------------------------------------------------ writing and locking


def warn_unusable(directory: Path, reason: str) -> None:
    """Warn, once per cache root, that kernels cannot be cached in ``directory``."""
    root = cache_root()
    if root not in _warned:
        _warned.add(root)
        warnings.warn(f"numfuse cannot use its kernel cache in {directory} ({reason}): "
                      "kernels are compiled in every process. Set NUMFUSE_CACHE_DIR to a "
                      "writable directory, or pass cache=False to numfuse.jit.",
                      CacheWarning, stacklevel=5)


def usable_directory() -> Path | None:
    """The kernel directory (created if missing), or None after warning once if it cannot
    be written."""
    directory = cache_directory()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if directory not in _checked:
            material = json.dumps(cache_key_material(), indent=1, sort_keys=True).encode()
            with contextlib.suppress(OSError):
                if (directory / "key.json").read_bytes() == material:
                    material = b""
            if material:  # written once, for people reading the directory
                write_atomically(directory / "key.json", material)
            _checked.add(directory)
    except OSError as error:
        warn_unusable(directory, error.strerror or repr(error))
        return None
    return directory


def write_atomically(path: Path, data: bytes) -> None:
    """Readers see the old file or the whole new one, never a part."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def entry_lock(directory: Path, name: str) -> Iterator[None]:
    """Hold an exclusive lock on kernel ``name``'s entry while it is loaded or compiled."""
    if fcntl is None:  # pragma: no cover - Windows: atomic writes and the digest only
        yield
        return
    with open(directory / f"{name}.lock", "ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock


# ------------------------------------------------------------------ the entry format


def encode(code: ObjectCode) -> bytes:
    """The bytes of ``code``'s cache entry."""
    payload = code.object + code.bitcode
    meta = {"library": code.name, "symbol": code.symbol, "object": len(code.object),
            "bitcode": len(code.bitcode), "sha256": hashlib.sha256(payload).hexdigest()}
    return _MAGIC + json.dumps(meta).encode() + b"\n" + payload


def decode(data: bytes, name: str) -> ObjectCode:
    """The entry's compiled kernel; ValueError if it is damaged or holds another kernel."""
    if not data.startswith(_MAGIC):
        raise ValueError("not a numfuse kernel file")
    line, _, payload = data[len(_MAGIC):].partition(b"\n")
    meta = json.loads(line)
    if len(payload) != meta["object"] + meta["bitcode"]:
        raise ValueError("truncated")
    if hashlib.sha256(payload).hexdigest() != meta["sha256"]:
        raise ValueError("its content does not match its digest")
    if meta["library"] != name:
        raise ValueError(f"it holds kernel {meta['library']}")
    return ObjectCode(name, str(meta["symbol"]), payload[:meta["object"]],
                      payload[meta["object"]:])
