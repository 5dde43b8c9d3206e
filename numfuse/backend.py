"""The backend: the only module that imports numba.

It writes a kernel's generated source to a real file (so numba's errors and tracebacks
point at readable lines), imports it as a module, swaps the plain-Python helpers it uses
for compiled ones and builds an eager ``numba.guvectorize`` gufunc from it, loading the
compiled code from the disk cache when a sound entry is there.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import math
import os
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import llvmlite
import numba
import numpy as np
from numba.core import caching, config
from numba.core.compiler_lock import global_compiler_lock
from numba.core.runtime import rtsys
from numba.np.ufunc.gufunc import GUFunc, GUFuncLowerer

from . import kernel_lib, vector_math
from .codegen import KernelSource

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

NUMBA_VERSION = numba.__version__

_lock = threading.Lock()


# ------------------------------------------------------------------ the disk cache
#
# Kernels persist across processes through numba's own cache: the generated source is a
# real file, and ``guvectorize(..., cache=True)`` saves the compiled kernel and its gufunc
# wrapper beside it (``<kernel>.kernel-<line>.py311.nbi`` index and ``.1.nbc`` data, and
# the same with a ``guf-`` prefix), where ``KernelCacheLocator`` points numba.
#
# When loading, numba 0.68 (core/caching.py) checks its own version (index header), a
# hash of the source file's content, the Python version (file names), the kernel's
# bytecode and closure, and ``codegen.magic_tuple()``: target triple, CPU name, CPU
# features.  It does not check the compiled helpers from kernel_lib.py inlined into a
# kernel (globals are not hashed), the llvmlite and numpy versions, numfuse's version and
# compile options, numba settings that change code, or process-wide LLVM settings such
# as a vector library: ``cache_key_material()`` holds those, and its hash names the
# directory.  The CPU is in it too, so machines sharing a home directory do not rewrite
# each other's index files.
#
# numba writes each file atomically (a rename) but cannot tell a damaged entry from a good
# one: a truncated data file raises, other damage could crash.  So numfuse records each
# entry's files and their SHA-256 in ``<kernel>.sum`` after numba saves them, verifies
# them before numba loads them, and holds a per-kernel file lock (``<kernel>.lock``) while
# it loads or compiles: processes compiling the same kernel at once compile it once.

CACHE_FORMAT = 1  # bump when the layout of the cache directory changes

_checked: set[Path] = set()  # kernel directories found writable by this process
_warned: set[Path] = set()  # cache roots already warned about
_claimed: set[str] = set()  # directories whose kernels KernelCacheLocator places
_scratch: tempfile.TemporaryDirectory[str] | None = None


class CacheWarning(RuntimeWarning):
    """The disk cache could not be used, or held a damaged entry that was compiled again."""


@cache
def cache_root() -> Path:
    """``NUMFUSE_CACHE_DIR``, else the user cache directory (``platformdirs``) for numfuse.

    Read once per process; ``reset_cache_settings()`` reads it again."""
    configured = os.environ.get("NUMFUSE_CACHE_DIR")
    if configured:
        return Path(configured).expanduser().absolute()  # numba keeps file paths
    import platformdirs

    return Path(platformdirs.user_cache_dir("numfuse"))


def reset_cache_settings() -> None:
    """Read ``NUMFUSE_CACHE_DIR`` again at the next compile and warn again about an
    unusable directory (for tests, and programs that change the variable)."""
    cache_root.cache_clear()
    _checked.clear()
    _warned.clear()


def extra_key_material() -> dict[str, str]:
    """Process-wide settings outside the kernel source that change compiled kernels.

    Add an entry for each such setting (an LLVM vector library, for example, would make
    kernels call libmvec's symbols, loadable only where the same library is set).  Today:
    the vector-math mode and the digest of vector_math.py, whose functions are inlined.
    Called at every compile: a setting changed at run time selects another directory.
    """
    return codegen_options_key()


def _file_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@cache
def _fixed_key_material() -> tuple[tuple[str, str], ...]:
    from numba.core.registry import cpu_target

    from . import __version__  # the package is fully imported before anything compiles

    triple, cpu, features = cpu_target.target_context.codegen().magic_tuple()
    return (
        ("format", str(CACHE_FORMAT)),
        ("numfuse", __version__),
        ("kernel_lib", _file_digest(kernel_lib.__file__)),
        ("backend", _file_digest(__file__)),
        ("numba", numba.__version__),
        ("llvmlite", llvmlite.__version__),
        ("numpy", np.__version__),
        ("python", sys.implementation.cache_tag or sys.version),
        ("cpu", f"{triple} {cpu} {features}"),
        ("numba settings", f"opt={_numba_setting('OPT')} "
                           f"boundscheck={_numba_setting('BOUNDSCHECK')}"),
    )


def _numba_setting(name: str) -> Any:
    return getattr(config, name, None)  # numba.core.config fills its globals at run time


def cache_key_material() -> dict[str, str]:
    """All that decides a cached kernel's machine code besides its source (numba checks
    the source, the bytecode and the CPU itself); the kernel directory is named by its hash."""
    return {**dict(_fixed_key_material()), **extra_key_material()}


def cache_directory() -> Path:
    """This process's kernel directory: ``<cache_root()>/kernels/<hash of the key>``."""
    key = json.dumps(cache_key_material(), sort_keys=True).encode()
    return cache_root() / "kernels" / hashlib.sha256(key).hexdigest()[:16]


def _warn_unusable(directory: Path, reason: str) -> None:
    root = cache_root()
    if root not in _warned:
        _warned.add(root)
        warnings.warn(f"numfuse cannot use its kernel cache in {directory} ({reason}): "
                      "kernels are compiled in every process. Set NUMFUSE_CACHE_DIR to a "
                      "writable directory, or pass cache=False to numfuse.jit.",
                      CacheWarning, stacklevel=5)


def _usable_directory() -> Path | None:
    """The kernel directory (created if missing), or None after warning once if it cannot
    be written."""
    directory = cache_directory()
    locators = _numba_setting("CACHE_LOCATOR_CLASSES")
    if locators and KernelCacheLocator.__name__ not in locators:
        _warn_unusable(directory, "NUMBA_CACHE_LOCATOR_CLASSES is set and does not list "
                       "numfuse.backend.KernelCacheLocator")
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if directory not in _checked:
            material = json.dumps(cache_key_material(), indent=1, sort_keys=True).encode()
            with contextlib.suppress(OSError):
                if (directory / "key.json").read_bytes() == material:
                    material = b""
            if material:  # written once, for people reading the directory
                _write_atomically(directory / "key.json", material)
            _checked.add(directory)
    except OSError as error:
        _warn_unusable(directory, error.strerror or repr(error))
        return None
    return directory


def _scratch_directory() -> Path:
    """Where kernel sources go when nothing may persist; removed when the process exits."""
    global _scratch
    if _scratch is None:
        _scratch = tempfile.TemporaryDirectory(prefix="numfuse-kernels-")
    return Path(_scratch.name)


def _write_atomically(path: Path, data: bytes) -> None:
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


def write_source(kernel: KernelSource, directory: Path) -> Path:
    """Write the kernel's source to ``directory`` unless the file already holds it."""
    path = directory / f"{kernel.name}.py"
    text = kernel.source.encode()
    try:
        current = path.read_bytes()
    except OSError:
        current = None
    if current != text:
        _write_atomically(path, text)
    return path


class KernelCacheLocator(caching.InTreeCacheLocator):
    """Places numba's cache files of a numfuse kernel beside its source file.

    It answers only for kernel files in numfuse's cache directories, so installing it
    first in numba's locator list changes nothing for other numba functions (which
    numba would otherwise cache in ``NUMBA_CACHE_DIR`` or a ``__pycache__`` folder).
    """

    def __init__(self, py_func: Any, py_file: str) -> None:
        super().__init__(py_func, py_file)
        self._cache_path = os.path.dirname(py_file)

    def ensure_cache_path(self) -> None:
        os.makedirs(self._cache_path, exist_ok=True)  # writability was checked once

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> KernelCacheLocator | None:
        if os.path.dirname(py_file) not in _claimed:
            return None
        return cls(py_func, py_file)


def _claim(directory: Path) -> None:
    _claimed.add(str(directory))
    locators = caching.CacheImpl._locator_classes
    if KernelCacheLocator not in locators:
        locators.insert(0, KernelCacheLocator)


@contextlib.contextmanager
def _entry_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` while one kernel is loaded or compiled."""
    if fcntl is None:  # pragma: no cover - Windows: atomic writes and the manifest only
        yield
        return
    with open(path, "ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _entry_files(directory: Path, name: str) -> list[Path]:
    """numba's index and data files for kernel ``name`` and for its gufunc wrapper."""
    return sorted(path for pattern in (f"{name}.*.nb[ic]", f"guf-{name}.*.nb[ic]")
                  for path in directory.glob(pattern))


def _save_manifest(directory: Path, name: str) -> None:
    files = {path.name: _file_digest(path) for path in _entry_files(directory, name)}
    _write_atomically(directory / f"{name}.sum", json.dumps(files, indent=1).encode())


def _check_entry(directory: Path, name: str) -> str | None:
    """None when kernel ``name`` has no entry, "" when its files match the manifest,
    otherwise what is wrong with them."""
    try:
        files = json.loads((directory / f"{name}.sum").read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        return f"unreadable manifest: {error}"
    if not isinstance(files, dict) or not files:
        return "the manifest lists no files"
    for file_name, digest in files.items():
        try:
            if _file_digest(directory / str(file_name)) != digest:
                return f"{file_name} was changed"
        except OSError:
            return f"{file_name} is missing"
    return ""


def _remove_entry(directory: Path, name: str) -> None:
    for path in (*_entry_files(directory, name), directory / f"{name}.sum"):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _stamps(directory: Path, name: str) -> list[tuple[str, int, int]]:
    stamps = []
    for path in _entry_files(directory, name):
        status = path.stat()
        stamps.append((path.name, status.st_size, status.st_mtime_ns))
    return stamps


def _jitted_helpers() -> dict[str, Any]:
    """Compiled versions of ``kernel_lib``'s helpers, calling each other compiled."""
    namespace: dict[str, Any] = {"np": np, "math": math}
    for name in kernel_lib.HELPERS:
        if name in kernel_lib.FLAG_RAISERS:
            namespace[name] = _flag_raiser(kernel_lib.FLAG_RAISERS[name])
            continue
        function = getattr(kernel_lib, name)
        rebound = types.FunctionType(function.__code__, namespace, name,
                                     function.__defaults__, function.__closure__)
        if name in kernel_lib.CONTRACTED:
            options: dict[str, Any] = {"fastmath": {"contract"}}
        elif name in kernel_lib.REASSOCIATED:
            options = {"fastmath": {"reassoc"}}
        else:
            options = {"inline": "always"}
        namespace[name] = numba.njit(error_model="numpy", **options)(rebound)
    return namespace


_helpers = cache(_jitted_helpers)

# The C library's feraiseexcept, called by its symbol name (resolved when the code is
# loaded, so kernels that call it can be cached, unlike a call through a ctypes pointer).
_FERAISEEXCEPT = numba.types.ExternalFunction(
    "feraiseexcept", numba.types.intc(numba.types.intc))


def _flag_raiser(flag: int) -> Any:
    """A compiled helper raising one floating-point flag (see kernel_lib.FLAG_RAISERS)."""
    feraiseexcept: Any = _FERAISEEXCEPT

    def raise_flag():  # type: ignore[no-untyped-def]
        feraiseexcept(flag)

    return numba.njit(inline="always")(raise_flag)


def load_module(kernel: KernelSource, directory: Path) -> types.ModuleType:
    """The kernel's module, its file written to ``directory``.

    The module is compiled from ``kernel.source`` (not from a ``__pycache__`` file that
    could be stale) under the file's name, which numba's cache and tracebacks use.  It
    holds kernel_lib's plain-Python helpers until ``_use_compiled_helpers``."""
    path = write_source(kernel, directory)
    module_name = f"numfuse_kernels.{kernel.name}"
    module = types.ModuleType(module_name)
    module.__file__ = str(path)
    exec(builtins.compile(kernel.source, str(path), "exec"), module.__dict__)
    sys.modules.setdefault(module_name, module)
    return module


def _use_compiled_helpers(namespace: dict[str, Any]) -> None:
    """Swap the kernel_lib helpers a kernel module imported for their compiled versions.

    Done only before numba compiles the kernel: making the helpers takes longer than
    loading a kernel from the disk cache, which does not need them."""
    for name, compiled in _helpers().items():
        if name in namespace:
            namespace[name] = compiled


_GUFunc: Any = GUFunc  # numba's partial annotations do not list its private methods


class _KernelGUFunc(_GUFunc):
    """numba's eager GUFunc, preparing the lowering of calls from ``@njit`` code only when
    such a call is first typed: that setup imports ``numba.np.npyimpl``, about 30 ms, a
    third of loading a cached kernel in a fresh process (numba 0.68, ``GUFunc._initialize``).
    """

    def _initialize(self, dispatcher: Any) -> None:
        self.build_ufunc()
        self._install_type()
        self._lowering_ready = False

    def _type_me(self, argtys: Any, kws: Any) -> Any:
        if not self._lowering_ready:
            self._lower_me = GUFuncLowerer(self)
            self._install_cg()
            self._lowering_ready = True
        return super()._type_me(argtys, kws)


def _guvectorize(module: types.ModuleType, kernel: KernelSource, disk: bool) -> Any:
    """``numba.guvectorize([signature], layout, nopython=True, cache=disk)(kernel)``."""
    options: dict[str, Any] = {"nopython": True}
    if kernel.fastmath:
        options["fastmath"] = set(kernel.fastmath)
    gufunc = _KernelGUFunc(module.kernel, kernel.layout, cache=disk, targetoptions=options)
    gufunc.add(kernel.signature)
    gufunc.disable_compile()
    return gufunc.build_ufunc()


def _build(module: types.ModuleType, kernel: KernelSource, disk: bool) -> Any:
    """Compile the kernel (saving it to the disk cache with ``disk``)."""
    _use_compiled_helpers(module.__dict__)
    return _guvectorize(module, kernel, disk)


def _load_overload(self: Any, sig: Any, target_context: Any) -> Any:
    """numba's ``Cache.load_overload`` minus the up-front ``target_context.refresh()``.

    That refresh imports every typing and lowering registry (about 0.5 s the first time in
    a process, scipy included), which compiling needs and loading object code does not
    (it needs the runtime).  On a miss it refreshes before returning, so numba then
    compiles exactly as it would have."""
    rtsys.initialize(target_context)
    data = self._load_overload(sig, target_context)
    if data is None:
        _use_compiled_helpers(self._py_func.__globals__)
        target_context.refresh()
    return data


def _build_from_disk(module: types.ModuleType, kernel: KernelSource) -> Any:
    """Load the kernel from the disk cache (compiling it on a miss), numba's cache loads
    skipping the refresh (and the compiled helpers) unless they miss.  The patch
    is in place only while this thread holds numba's compiler lock, so no other numba
    compile or cache load can see it."""
    with global_compiler_lock:
        original = caching.Cache.load_overload
        caching.Cache.load_overload = _load_overload  # type: ignore[method-assign]
        try:
            return _guvectorize(module, kernel, disk=True)
        finally:
            caching.Cache.load_overload = original  # type: ignore[method-assign]


def compile_gufunc(kernel: KernelSource, cache: bool = True) -> Any:
    """Compile ``kernel`` to an eager numba gufunc (a real numpy gufunc).

    With ``cache`` the compiled code comes from the disk cache when it holds a sound entry
    (``loaded_from_disk`` tells), and is saved there otherwise.  Without it, or when the
    cache directory cannot be written, nothing persists: the source goes to a temporary
    directory removed at exit."""
    with _lock:
        directory = _usable_directory() if cache else None
        if directory is not None:
            _claim(directory)
            try:
                with _entry_lock(directory / f"{kernel.name}.lock"):
                    return _load_or_compile(kernel, directory)
            except OSError as error:
                _warn_unusable(directory, error.strerror or repr(error))
        return _build(load_module(kernel, _scratch_directory()), kernel, disk=False)


def _load_or_compile(kernel: KernelSource, directory: Path) -> Any:
    """With the kernel's entry locked: load it if its files are intact, otherwise remove
    it (warning when it was damaged), compile and save a new one."""
    module = load_module(kernel, directory)
    problem = _check_entry(directory, kernel.name)
    if problem == "":
        before = _stamps(directory, kernel.name)
        try:
            gufunc = _build_from_disk(module, kernel)
        except Exception as error:  # a damaged entry must never stop the compile
            problem = f"numba could not load it: {error!r}"
        else:
            if not loaded_from_disk(gufunc) or _stamps(directory, kernel.name) != before:
                _save_manifest(directory, kernel.name)  # numba replaced a stale entry
            return gufunc
    if problem is not None:
        warnings.warn(f"numfuse's cached kernel {kernel.name} in {directory} is damaged "
                      f"({problem}); it was removed and compiled again", CacheWarning,
                      stacklevel=5)
    _remove_entry(directory, kernel.name)
    gufunc = _build(module, kernel, disk=True)
    _save_manifest(directory, kernel.name)
    return gufunc


def loaded_from_disk(gufunc: Any) -> bool:
    """True when the gufunc's kernel was loaded from the disk cache, not compiled.

    numba rebuilds a cached compile result without ``metadata`` (numba 0.68,
    ``CompileResult._rebuild``); a fresh compile always has it."""
    return _compile_results(gufunc)[0].metadata is None


# ------------------------------------------------------------------ LLVM IR and assembly
#
# numba's GUFunc has no public inspect_llvm/inspect_asm.  An eager gufunc keeps, per
# signature, the compile result of its kernel (``gufunc_builder._cres``), whose
# ``library`` holds the optimised module and ``fndesc`` the kernel function's symbol.
# This is numba-internal and checked by tests/test_inspection.py against NUMBA_VERSION.


def _compile_results(gufunc: Any) -> list[Any]:
    try:
        return list(gufunc.gufunc_builder._cres.values())
    except AttributeError as error:  # pragma: no cover - depends on numba internals
        raise RuntimeError(
            f"cannot reach the compiled code of a numba {NUMBA_VERSION} gufunc "
            f"({error}); numfuse's LLVM IR access was written for numba 0.68"
        ) from None


def _compile_result(gufunc: Any) -> Any:
    """The kernel's compile result, compiled again (once) if it came from the disk cache:
    numba keeps only object code for cached code and disables inspecting it."""
    if not loaded_from_disk(gufunc):
        return _compile_results(gufunc)[0]
    with _lock:
        fresh = getattr(gufunc, "_numfuse_inspectable", None)
        if fresh is None:
            builder = gufunc.gufunc_builder
            _use_compiled_helpers(builder.py_func.__globals__)
            fresh = numba.guvectorize(list(builder._sigs), builder.signature,
                                      nopython=True)(builder.py_func)
            gufunc._numfuse_inspectable = fresh
    return _compile_results(fresh)[0]


def llvm_ir(gufunc: Any) -> str:
    """The optimised LLVM IR of the module holding the kernel (and its C wrapper)."""
    return str(_compile_result(gufunc).library.get_llvm_str())


def asm(gufunc: Any) -> str:
    """The host machine's assembly for the kernel's module."""
    return str(_compile_result(gufunc).library.get_asm_str())


def kernel_symbol(gufunc: Any) -> str:
    """The LLVM name of the kernel's own function inside ``llvm_ir(gufunc)``."""
    return str(_compile_result(gufunc).fndesc.llvm_func_name)


# ------------------------------------------------------------------ vector math
#
# exp, log, expm1, log1p and tanh compile to numfuse's vectorisable versions
# (vector_math.py) instead of scalar libm calls, so LLVM vectorises the loops that use
# them; ``NUMFUSE_VECTOR_MATH=0`` (read once, at import) keeps numpy's libm calls.  An LLVM
# vector library (glibc's libmvec) is not used: LLVM 22, in llvmlite 0.50, no longer has
# the process-wide ``-vector-library`` option (it moved into TargetOptions, which
# llvmlite does not expose), and its x86 libmvec table has no AVX-512 (8 x double) entries.
#
# The mode changes the generated source (``exp_f64(x)`` or ``np.exp(x)``) and therefore the
# kernel's name; the helpers inlined into a kernel are not in its source, so a disk cache
# must also key on ``codegen_options_key()``.

VECTOR_MATH: bool = vector_math.ENABLED


def codegen_options_key() -> dict[str, str]:
    """The vector-math settings compiled kernels depend on: the mode and a digest of the
    functions' source."""
    source = Path(vector_math.__file__).read_bytes()
    return {"vector_math": "on" if VECTOR_MATH else "off",
            "vector_math_source": hashlib.sha256(source).hexdigest()}


# ------------------------------------------------------------------ threads


def thread_count() -> int:
    """numba's thread count (``numba.set_num_threads`` / ``NUMBA_NUM_THREADS``), read
    without starting numba's own thread pool when nothing has started it yet."""
    from numba.np.ufunc import parallel

    if getattr(parallel, "_is_initialized", False):
        return int(numba.get_num_threads())
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
