"""The backend: the only module that imports numba.

A kernel's LLVM IR (``lowering``) is optimised for this machine, loaded and wrapped as a
numpy gufunc with numba's code generator (its LLVM target, optimisation pipeline and JIT
engine) and its gufunc constructor; numba's Python front end is not involved.  Compiled
kernels persist across processes as object code in the disk cache.  numba compiles
only the few numpy functions the kernel language has no code of its own for
(``lowering.Fallback``: complex transcendental functions).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba.core import config
from numba.core.compiler_lock import global_compiler_lock
from numba.np.ufunc import _internal  # type: ignore[attr-defined]

from . import kernel_lib, lowering, vector_math
from .codegen import KernelSource
from .lowering import Fallback, LoweredKernel

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

NUMBA_VERSION = numba.__version__

_lock = threading.RLock()


# ------------------------------------------------------------------ the disk cache
#
# A compiled kernel persists as one file, ``<kernel>.nfk`` in the kernel directory: a
# header line, a JSON line (the LLVM library's name, the loop function's symbol, the
# sizes and the SHA-256 of what follows) and the object code numba's JIT engine loads,
# followed by the optimised module's bitcode.  The file is written atomically (a rename);
# a file whose digest does not match is removed and the kernel compiled again, with a
# warning.  A per-kernel file lock (``<kernel>.lock``) is held while a kernel is loaded
# or compiled, so processes compiling the same kernel at once compile it once.
#
# The kernel's name is a hash of its generated source, which fixes its statements.  What
# else decides the machine code -- the lowering and helper code, the numba, llvmlite,
# numpy and Python versions, the CPU, code-changing settings -- is
# ``cache_key_material()``, whose hash names the directory.

CACHE_FORMAT = 2  # bump when the layout of the cache directory changes
_MAGIC = b"NUMFUSE-KERNEL 2\n"

_checked: set[Path] = set()  # kernel directories found writable by this process
_warned: set[Path] = set()  # cache roots already warned about


class CacheWarning(RuntimeWarning):
    """The disk cache could not be used, or held a damaged entry that was compiled again."""


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


def extra_key_material() -> dict[str, str]:
    """Process-wide settings outside the kernel source that change compiled kernels.

    Today: the vector-math mode and the digest of vector_math.py, whose functions the
    kernels inline.  Called at every compile: a setting changed at run time selects
    another directory."""
    return codegen_options_key()


def _file_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _code_digest() -> str:
    """One digest of the modules whose code ends up in a kernel's machine code."""
    digest = hashlib.sha256()
    for path in sorted(Path(lowering.__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    for module in (kernel_lib.__file__, __file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()


@cache
def _fixed_key_material() -> tuple[tuple[str, str], ...]:
    from . import __version__  # the package is fully imported before anything compiles

    triple, cpu, features = _codegen().magic_tuple()
    return (
        ("format", str(CACHE_FORMAT)),
        ("numfuse", __version__),
        ("code", _code_digest()),
        ("numba", numba.__version__),
        ("llvmlite", llvmlite.__version__),
        ("numpy", np.__version__),
        ("python", sys.implementation.cache_tag or sys.version),
        ("cpu", f"{triple} {cpu} {features}"),
        ("numba settings", f"opt={_numba_setting('OPT')} "
                           f"loop_vectorize={_numba_setting('LOOP_VECTORIZE')}"),
    )


def _numba_setting(name: str) -> Any:
    return getattr(config, name, None)  # numba.core.config fills its globals at run time


def cache_key_material() -> dict[str, str]:
    """All that decides a cached kernel's machine code besides its source; the kernel
    directory is named by its hash."""
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


@contextlib.contextmanager
def _entry_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` while one kernel is loaded or compiled."""
    if fcntl is None:  # pragma: no cover - Windows: atomic writes and the digest only
        yield
        return
    with open(path, "ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def entry_path(directory: Path, name: str) -> Path:
    """The cache file of kernel ``name``."""
    return directory / f"{name}.nfk"


def _encode_entry(code: ObjectCode) -> bytes:
    payload = code.object + code.bitcode
    meta = {"library": code.name, "symbol": code.symbol, "object": len(code.object),
            "bitcode": len(code.bitcode), "sha256": hashlib.sha256(payload).hexdigest()}
    return _MAGIC + json.dumps(meta).encode() + b"\n" + payload


def _decode_entry(data: bytes, name: str) -> ObjectCode:
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


# ------------------------------------------------------------------ compiling


class CompiledGufunc:
    """A compiled kernel: ``ufunc`` is the numpy gufunc (calling this object calls it);
    ``from_disk`` tells whether it was loaded from the disk cache."""

    def __init__(self, ufunc: Any, library: Any, code: ObjectCode, from_disk: bool,
                 source: KernelSource) -> None:
        self.ufunc = ufunc
        self.library = library  # keeps the machine code alive
        self.code = code
        self.from_disk = from_disk
        self.source = source

    @property
    def symbol(self) -> str:
        return self.code.symbol

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.ufunc(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<numfuse gufunc {self.source.name} {self.source.layout}>"


@cache
def _codegen() -> Any:
    from numba.core.registry import cpu_target

    _register_externals()
    return cpu_target.target_context.codegen()


def _register_externals() -> None:
    """Make the C functions of ``kernel_lib.EXTERNAL`` known to the JIT by name."""
    address = ctypes.cast(kernel_lib.NEGATIVE_POWER_CALLBACK, ctypes.c_void_p).value
    symbol = kernel_lib.EXTERNAL["note_negative_power"]
    assert symbol is not None and address is not None
    llvm.add_symbol(symbol, address)


def compile_gufunc(kernel: KernelSource, cache: bool = True) -> CompiledGufunc:
    """Compile ``kernel`` to a numpy gufunc.

    With ``cache`` the compiled code comes from the disk cache when it holds a sound entry
    (``loaded_from_disk`` tells), and is saved there otherwise.  Without it, or when the
    cache directory cannot be written, nothing persists."""
    with _lock:
        directory = _usable_directory() if cache else None
        if directory is not None:
            try:
                with _entry_lock(directory / f"{kernel.name}.lock"):
                    return _load_or_compile(kernel, directory)
            except OSError as error:
                _warn_unusable(directory, error.strerror or repr(error))
        return _gufunc(kernel, compile_object(kernel), from_disk=False)


def _load_or_compile(kernel: KernelSource, directory: Path) -> CompiledGufunc:
    """With the kernel's entry locked: load it if it is sound, otherwise remove it
    (warning when it was damaged), compile and save a new one."""
    path = entry_path(directory, kernel.name)
    problem = None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = None
    if data is not None:
        try:
            return _gufunc(kernel, _decode_entry(data, kernel.name), from_disk=True)
        except Exception as error:  # a damaged entry must never stop the compile
            problem = str(error) or repr(error)
        warnings.warn(f"numfuse's cached kernel {kernel.name} in {directory} is damaged "
                      f"({problem}); it was removed and compiled again", CacheWarning,
                      stacklevel=5)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    code = compile_object(kernel)
    gufunc = _gufunc(kernel, code, from_disk=False)
    _write_atomically(path, _encode_entry(code))
    return gufunc


@dataclasses.dataclass(frozen=True)
class ObjectCode:
    """A kernel compiled for this machine, not yet loaded: the object code of its
    optimised module, that module's bitcode (for reading its IR and assembly) and the
    symbol of the gufunc's loop function."""

    name: str
    symbol: str
    object: bytes
    bitcode: bytes


def compile_object(kernel: KernelSource) -> ObjectCode:
    """Lower ``kernel``, link the helpers it calls, optimise it once with LLVM's O3
    pipeline and emit its object code."""
    lowered = lowering.lower(kernel)
    module = _linked(lowered)
    passes, builder = _pipeline()
    passes.run(module, builder)
    machine = _codegen()._tm
    return ObjectCode(kernel.name, lowered.symbol, bytes(machine.emit_object(module)),
                      bytes(module.as_bitcode()))


def _linked(lowered: LoweredKernel) -> Any:
    """One LLVM module of the kernel, its helpers and its fallbacks, laid out for this
    machine."""
    codegen = _codegen()
    module = llvm.parse_assembly(lowered.modules[0])
    for text in lowered.modules[1:]:
        module.link_in(llvm.parse_assembly(text))
    for fallback in sorted(lowered.fallbacks, key=lambda needed: needed.symbol):
        fallback_module, adapter = _fallback(fallback)
        module.link_in(llvm.parse_bitcode(fallback_module))
        module.link_in(llvm.parse_assembly(adapter))
    module.triple = llvm.get_process_triple()
    module.data_layout = codegen._data_layout
    module.verify()
    return module


def _pipeline() -> tuple[Any, Any]:
    """LLVM's optimisation pipeline at numba's level (O3, loops vectorised), for this
    machine.  Run once: numba's own libraries first run a cheaper pipeline for the
    reference counts of its code, which kernels do not have."""
    from numba.core.llvm_bindings import create_pass_builder

    builder = create_pass_builder(_codegen()._tm, opt=_numba_setting("OPT"),
                                  loop_vectorize=_numba_setting("LOOP_VECTORIZE"),
                                  slp_vectorize=_numba_setting("SLP_VECTORIZE"))
    return builder.getModulePassManager(), builder


def _load(code: ObjectCode) -> Any:
    """The kernel's object code loaded into numba's JIT engine (a numba code library)."""
    with global_compiler_lock:
        return _codegen().unserialize_library((code.name, "object", (code.object,
                                                                     code.bitcode)))


def _gufunc(kernel: KernelSource, code: ObjectCode, from_disk: bool) -> CompiledGufunc:
    library = _load(code)
    with global_compiler_lock:
        address = library.get_pointer_to_function(code.symbol)
    if not address:  # pragma: no cover - a lowering bug
        raise RuntimeError(f"kernel {kernel.name}: no function {code.symbol} in its code")
    program = kernel.program
    assert program is not None
    dtypes = [operand.dtype.num for operand in program.operands]
    ufunc = _internal.fromfunc(kernel.name, None, [address], [dtypes], len(program.inputs),
                               len(program.outputs), [None], [library], _internal.PyUFunc_None,
                               kernel.layout, ())
    return CompiledGufunc(ufunc, library, code, from_disk, kernel)


def loaded_from_disk(gufunc: CompiledGufunc) -> bool:
    """True when the gufunc's kernel was loaded from the disk cache, not compiled."""
    return gufunc.from_disk


# ------------------------------------------------------------------ numba's functions
#
# A numpy function the kernel language has no code for is compiled by numba, once per
# process and argument dtypes, with an adapter of the lowering's calling convention
# (arguments and result in registers) around numba's (a status code, the result through
# a pointer).


@cache
def _fallback(needed: Fallback) -> tuple[bytes, str]:
    """The bitcode of numba's compiled function and the IR of the adapter around it."""
    from numba.core.registry import cpu_target

    arguments = [f"a{position}" for position in range(len(needed.arguments))]
    namespace: dict[str, Any] = {"np": np}
    exec(f"def call({', '.join(arguments)}):\n"
         f"    return np.{needed.function}({', '.join(arguments)})\n", namespace)
    argtypes = [numba.from_dtype(dtype) for dtype in needed.arguments]
    restype = numba.from_dtype(needed.result)
    dispatcher = numba.njit(error_model="numpy")(namespace["call"])
    dispatcher.compile(tuple(argtypes))
    result: Any = dispatcher.overloads[tuple(argtypes)]
    if result.signature.return_type != restype:  # pragma: no cover - numpy and numba agree
        raise TypeError(f"numba types np.{needed.function}{tuple(needed.arguments)} as "
                        f"{result.signature.return_type}, numpy as {needed.result}")
    context = cpu_target.target_context
    module = ir.Module(name=needed.symbol)
    callee = ir.Function(module, context.call_conv.get_function_type(restype, argtypes),
                         name=result.fndesc.llvm_func_name)
    adapter = ir.Function(module, ir.FunctionType(
        context.get_value_type(restype), [context.get_value_type(t) for t in argtypes]),
        name=needed.symbol)
    adapter.linkage = "linkonce_odr"
    builder = ir.IRBuilder(adapter.append_basic_block("entry"))
    _, value = context.call_conv.call_function(builder, callee, restype, argtypes,
                                               list(adapter.args))
    builder.ret(value)
    with global_compiler_lock:
        bitcode = result.library._get_module_for_linking().as_bitcode()
    return bytes(bitcode), str(module)


# ------------------------------------------------------------------ LLVM IR and assembly


def llvm_ir(gufunc: CompiledGufunc) -> str:
    """The optimised LLVM IR of the module holding the kernel."""
    return str(llvm.parse_bitcode(gufunc.code.bitcode))


def asm(gufunc: CompiledGufunc) -> str:
    """The host machine's assembly for the kernel's module."""
    return str(_codegen()._tm.emit_assembly(llvm.parse_bitcode(gufunc.code.bitcode)))


def kernel_symbol(gufunc: CompiledGufunc) -> str:
    """The LLVM name of the kernel's element loop inside ``llvm_ir(gufunc)`` (the gufunc's
    loop function, ``gufunc.symbol``, calls it once per row)."""
    return lowering.row_symbol(gufunc.symbol)


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
