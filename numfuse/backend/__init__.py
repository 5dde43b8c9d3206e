"""The backend: a kernel's LLVM IR in, a numpy gufunc out.

``lowering`` writes a kernel's LLVM IR; the backend links in the helpers and the numba
functions it calls, optimises the module once for this machine, emits its object code,
loads it into the JIT engine and wraps its loop function as a numpy gufunc.  Compiled
kernels persist across processes as object code in the disk cache (``store``).  Every use
of numba is in ``numba_private``; numba's Python front end compiles only the few numpy
functions the kernel language has no code of its own for (``lowering.Fallback``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm

from .. import kernel_lib, lowering
from ..codegen import KernelSource
from ..lowering import VECTOR_VARIANT_PREFIX, LoweredKernel, numpy_loops
from . import numba_private, store
from .numba_private import thread_count
from .store import CacheWarning, ObjectCode

__all__ = ["CacheWarning", "CompiledGufunc", "ObjectCode", "asm", "compile_gufunc",
           "compile_object", "kernel_symbol", "llvm_ir", "loaded_from_disk", "thread_count"]

_lock = threading.RLock()
# A fork while another thread compiles (or unpickles) a kernel waits for it: the child has
# only the forking thread, and a lock another thread held would stay held there forever
# (its cache entry's file lock too).
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release,
                        after_in_child=_lock.release)


class CompiledGufunc:
    """A compiled kernel: ``ufunc`` is the numpy gufunc (calling this object calls it);
    ``address`` is its loop function's (numpy's gufunc loop signature: arguments,
    dimensions, steps, data), which threads call directly on chunks of a call
    (``threads``); ``from_disk`` tells whether it was loaded from the disk cache."""

    def __init__(self, ufunc: Any, library: Any, code: ObjectCode, from_disk: bool,
                 source: KernelSource, address: int = 0) -> None:
        self.ufunc = ufunc
        self.address = address
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


def compile_gufunc(kernel: KernelSource, cache: bool = True) -> CompiledGufunc:
    """Compile ``kernel`` to a numpy gufunc.

    With ``cache`` the compiled code comes from the disk cache when it holds a sound entry
    (``loaded_from_disk`` tells), and is saved there otherwise.  Without it, or when the
    cache directory cannot be written, nothing persists."""
    with _lock:
        directory = store.usable_directory() if cache else None
        if directory is not None:
            try:
                with store.entry_lock(directory, kernel.name):
                    return _load_or_compile(kernel, directory)
            except OSError as error:
                store.warn_unusable(directory, error.strerror or repr(error))
        return _gufunc(kernel, compile_object(kernel), from_disk=False)


def _load_or_compile(kernel: KernelSource, directory: Path) -> CompiledGufunc:
    """With the kernel's entry locked: load it if it is sound, otherwise remove it
    (warning when it was damaged), compile and save a new one."""
    path = store.entry_path(directory, kernel.name)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = None
    if data is not None:
        try:
            return _gufunc(kernel, store.decode(data, kernel.name), from_disk=True)
        except Exception as error:  # a damaged entry must never stop the compile
            problem = str(error) or repr(error)
        warnings.warn(f"numfuse's cached kernel {kernel.name} in {directory} is damaged "
                      f"({problem}); it was removed and compiled again", CacheWarning,
                      stacklevel=5)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    code = compile_object(kernel)
    gufunc = _gufunc(kernel, code, from_disk=False)
    store.write_atomically(path, store.encode(code))
    return gufunc


def compile_object(kernel: KernelSource) -> ObjectCode:
    """Lower ``kernel``, link the helpers it calls, optimise it once with LLVM's O3
    pipeline and emit its object code."""
    lowered = lowering.lower(kernel)
    module = _linked(lowered)
    passes, builder = numba_private.optimisation_pipeline()
    passes.run(module, builder)
    if any(function.name.startswith(VECTOR_VARIANT_PREFIX) for function in module.functions):
        _inline_vector_variants(module, builder)
    machine = numba_private.target_machine()
    return ObjectCode(kernel.name, lowered.symbol, bytes(machine.emit_object(module)),
                      bytes(module.as_bitcode()))


def _inline_vector_variants(module: Any, builder: Any) -> None:
    """Inline the masked vector versions of rare library calls the loop vectoriser
    called (``lowering.scalars.rare_libm``; they are ``alwaysinline``, but exist as calls
    only once O3 has inlined everything): an out-of-line call took every iteration's
    vector registers (caller-saved) through memory even when no lane needed it, some
    15-20% of a sin loop."""
    passes = llvm.create_new_module_pass_manager()
    passes.add_always_inliner_pass()
    passes.run(module, builder)


def _linked(lowered: LoweredKernel) -> Any:
    """One LLVM module of the kernel, its helpers and numba's functions, laid out for
    this machine."""
    layout = numba_private.data_layout()  # sets up LLVM for this machine first
    module = llvm.parse_assembly(lowered.modules[0])
    for text in lowered.modules[1:]:
        module.link_in(llvm.parse_assembly(text))
    for needed in sorted(lowered.fallbacks, key=lambda fallback: fallback.symbol):
        bitcode, adapter = numba_private.compile_numpy_function(
            needed.function, needed.arguments, needed.result, needed.symbol)
        # The adapter first: LLVM's linker brings in numba's linkonce_odr function only if
        # the module already calls it.  (Linked the other way round, the kernel called the
        # copy numba's JIT holds in the compiling process, and crashed loaded from the
        # disk cache in another.)
        module.link_in(llvm.parse_assembly(adapter))
        module.link_in(llvm.parse_bitcode(bitcode))
    module.triple = llvm.get_process_triple()
    module.data_layout = layout
    module.verify()
    return module


@cache
def _register_externals() -> None:
    """Make the C functions kernels call by name known to the JIT: those of
    ``kernel_lib.EXTERNAL`` and numpy's scalar complex functions (``numpy_loops``), before
    any kernel, compiled or loaded from the disk cache, is loaded."""
    address = ctypes.cast(kernel_lib.NEGATIVE_POWER_CALLBACK, ctypes.c_void_p).value
    symbol = kernel_lib.EXTERNAL["note_negative_power"]
    assert symbol is not None and address is not None
    llvm.add_symbol(symbol, address)
    for symbol, address in numpy_loops.available().items():
        llvm.add_symbol(symbol, address)


def _gufunc(kernel: KernelSource, code: ObjectCode, from_disk: bool) -> CompiledGufunc:
    _register_externals()
    library = numba_private.load_object(code.name, code.object, code.bitcode)
    address = numba_private.function_address(library, code.symbol)
    if not address:  # pragma: no cover - a lowering bug
        raise RuntimeError(f"kernel {kernel.name}: no function {code.symbol} in its code")
    program = kernel.program
    assert program is not None
    dtypes = [operand.dtype.num for operand in program.operands]
    # named as its warnings name it (numpy writes the gufunc's name into them)
    ufunc = numba_private.make_gufunc(kernel.reports or kernel.name, address, dtypes,
                                      len(program.inputs), len(program.outputs), library,
                                      kernel.layout)
    return CompiledGufunc(ufunc, library, code, from_disk, kernel, address)


def loaded_from_disk(gufunc: CompiledGufunc) -> bool:
    """True when the gufunc's kernel was loaded from the disk cache, not compiled."""
    return gufunc.from_disk


# ------------------------------------------------------------------ LLVM IR and assembly


def llvm_ir(gufunc: CompiledGufunc) -> str:
    """The optimised LLVM IR of the module holding the kernel."""
    return str(llvm.parse_bitcode(gufunc.code.bitcode))


def asm(gufunc: CompiledGufunc) -> str:
    """The host machine's assembly for the kernel's module."""
    return str(numba_private.target_machine().emit_assembly(
        llvm.parse_bitcode(gufunc.code.bitcode)))


def kernel_symbol(gufunc: CompiledGufunc) -> str:
    """The LLVM name of the kernel's element loop inside ``llvm_ir(gufunc)`` (the gufunc's
    loop function, ``gufunc.symbol``, calls it once per row)."""
    return lowering.row_symbol(gufunc.symbol)
