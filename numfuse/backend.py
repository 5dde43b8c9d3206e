"""The backend: the only module that imports numba.

It writes a kernel's generated source to a real file (so numba's errors and tracebacks
point at readable lines), imports it as a module, swaps the plain-Python helpers it uses
for compiled ones and builds an eager ``numba.guvectorize`` gufunc from it.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import tempfile
import threading
import types
from functools import cache
from pathlib import Path
from typing import Any

import numba
import numpy as np

from . import kernel_lib
from .codegen import KernelSource

NUMBA_VERSION = numba.__version__

_lock = threading.Lock()


def kernel_directory() -> Path:
    """Where generated kernel files are written: ``NUMFUSE_CACHE_DIR`` or the user cache."""
    configured = os.environ.get("NUMFUSE_CACHE_DIR")
    if configured:
        base = Path(configured)
    else:
        try:
            import platformdirs

            base = Path(platformdirs.user_cache_dir("numfuse"))
        except ImportError:  # pragma: no cover - platformdirs is a declared dependency
            base = Path(tempfile.gettempdir()) / "numfuse"
    directory = base / "kernels"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError:
        directory = Path(tempfile.mkdtemp(prefix="numfuse-kernels-"))
    return directory


@cache
def _kernel_dir() -> Path:
    return kernel_directory()


def write_source(kernel: KernelSource) -> Path:
    """Write the kernel's source atomically; the name is a hash of the text."""
    path = _kernel_dir() / f"{kernel.name}.py"
    if not path.exists() or path.read_text() != kernel.source:
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "w") as stream:
            stream.write(kernel.source)
        os.replace(temporary, path)
    return path


def _jitted_helpers() -> dict[str, Any]:
    """Compiled versions of ``kernel_lib``'s helpers, calling each other compiled."""
    namespace: dict[str, Any] = {"np": np, "math": math}
    for name in kernel_lib.HELPERS:
        function = getattr(kernel_lib, name)
        rebound = types.FunctionType(function.__code__, namespace, name,
                                     function.__defaults__, function.__closure__)
        if name in kernel_lib.CONTRACTED:
            options: dict[str, Any] = {"fastmath": {"contract"}}
        else:
            options = {"inline": "always"}
        namespace[name] = numba.njit(error_model="numpy", **options)(rebound)
    return namespace


_helpers = cache(_jitted_helpers)


def load_module(kernel: KernelSource) -> types.ModuleType:
    path = write_source(kernel)
    module_name = f"numfuse_kernels.{kernel.name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.setdefault(module_name, module)
    helpers = _helpers()
    for name in kernel.helpers:
        setattr(module, name, helpers[name])
    return module


def compile_gufunc(kernel: KernelSource) -> Any:
    """Compile ``kernel`` to an eager numba gufunc (a real numpy gufunc)."""
    with _lock:
        module = load_module(kernel)
        return numba.guvectorize([kernel.signature], kernel.layout, nopython=True)(module.kernel)


# ------------------------------------------------------------------ LLVM IR and assembly
#
# numba's GUFunc has no public inspect_llvm/inspect_asm.  An eager gufunc keeps, per
# signature, the compile result of its kernel (``gufunc_builder._cres``), whose
# ``library`` holds the optimised module and ``fndesc`` the kernel function's symbol.
# This is numba-internal and checked by tests/test_inspection.py against NUMBA_VERSION.


def _compile_result(gufunc: Any) -> Any:
    try:
        results = gufunc.gufunc_builder._cres
    except AttributeError as error:  # pragma: no cover - depends on numba internals
        raise RuntimeError(
            f"cannot reach the compiled code of a numba {NUMBA_VERSION} gufunc "
            f"({error}); numfuse's LLVM IR access was written for numba 0.68"
        ) from None
    return next(iter(results.values()))


def llvm_ir(gufunc: Any) -> str:
    """The optimised LLVM IR of the module holding the kernel (and its C wrapper)."""
    return str(_compile_result(gufunc).library.get_llvm_str())


def asm(gufunc: Any) -> str:
    """The host machine's assembly for the kernel's module."""
    return str(_compile_result(gufunc).library.get_asm_str())


def kernel_symbol(gufunc: Any) -> str:
    """The LLVM name of the kernel's own function inside ``llvm_ir(gufunc)``."""
    return str(_compile_result(gufunc).fndesc.llvm_func_name)
