"""Every use of numba, public or private, in one place.

The backend borrows four things from numba: its LLVM code generator (target machine, data
layout and optimisation pipeline, set up for this CPU), its JIT engine (which loads object
code and resolves numba's runtime symbols), its gufunc constructor, and its compiler, for
the few numpy functions the kernel language has no code of its own for.  Several of these
are private (``codegen._tm``, ``codegen._data_layout``, ``unserialize_library``,
``numba.np.ufunc._internal.fromfunc``, the call convention of compiled functions); they
were read for numba ``WRITTEN_FOR`` and are checked against it at import.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from functools import cache
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import config
from numba.core.compiler_lock import global_compiler_lock
from numba.np.ufunc import _internal  # type: ignore[attr-defined]

WRITTEN_FOR = "0.68"  # the numba minor version whose internals this module was read against
NUMBA_VERSION: str = numba.__version__


def version_problem(version: str) -> str | None:
    """Why numba ``version`` may not work with this module, or None when it is the one
    the module was written for."""
    if version == WRITTEN_FOR or version.startswith(WRITTEN_FOR + "."):
        return None
    return (f"numfuse's backend uses numba internals read for numba {WRITTEN_FOR}.x, and "
            f"numba {version} is installed: kernels may fail to compile or load. Install "
            f"numba=={WRITTEN_FOR}.* (pip install 'numba~={WRITTEN_FOR}.0').")


_problem = version_problem(NUMBA_VERSION)
if _problem is not None:  # pragma: no cover - depends on the installed numba
    warnings.warn(_problem, RuntimeWarning, stacklevel=2)


@cache
def _codegen() -> Any:
    from numba.core.registry import cpu_target

    return cpu_target.target_context.codegen()


def target_machine() -> Any:
    """The LLVM target machine numba made for this CPU (llvmlite ``TargetMachine``)."""
    return _codegen()._tm


def data_layout() -> str:
    """The data layout of modules compiled for ``target_machine()``."""
    return str(_codegen()._data_layout)


def toolchain_key() -> tuple[tuple[str, str], ...]:
    """numba's version, its code-changing settings and the CPU it compiles for."""
    triple, cpu, features = _codegen().magic_tuple()
    return (("numba", NUMBA_VERSION),
            ("numba settings", f"opt={setting('OPT')} "
                               f"loop_vectorize={setting('LOOP_VECTORIZE')}"),
            ("cpu", f"{triple} {cpu} {features}"))


def setting(name: str) -> Any:
    """numba's configuration value ``name`` (``numba.core.config`` fills its globals at
    run time, so they are read by name)."""
    return getattr(config, name, None)


def optimisation_pipeline() -> tuple[Any, Any]:
    """LLVM's module pass manager at numba's optimisation level (O3, loops and straight
    code vectorised) for this machine, and the pass builder that owns it."""
    from numba.core.llvm_bindings import create_pass_builder

    builder = create_pass_builder(target_machine(), opt=setting("OPT"),
                                  loop_vectorize=setting("LOOP_VECTORIZE"),
                                  slp_vectorize=setting("SLP_VECTORIZE"))
    return builder.getModulePassManager(), builder


# A fork while another thread compiles waits for that compile: numba's compiler lock is
# held across the fork, so a child never inherits it held by a thread it does not have.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=global_compiler_lock.acquire,
                        after_in_parent=global_compiler_lock.release,
                        after_in_child=global_compiler_lock.release)


def load_object(name: str, object_code: bytes, bitcode: bytes) -> Any:
    """Object code loaded into numba's JIT engine: a numba code library, which keeps the
    machine code alive for as long as it is referenced."""
    with global_compiler_lock:
        return _codegen().unserialize_library((name, "object", (object_code, bitcode)))


def function_address(library: Any, symbol: str) -> int:
    """The address of ``symbol`` in a loaded library (0 when it has no such function)."""
    with global_compiler_lock:
        return int(library.get_pointer_to_function(symbol) or 0)


def make_gufunc(name: str, address: int, dtypes: Sequence[int], inputs: int, outputs: int,
                library: Any, layout: str) -> np.ufunc:
    """A numpy gufunc whose one loop is the C function at ``address`` (numba's gufunc
    constructor; ``library`` is kept alive by the gufunc)."""
    ufunc: np.ufunc = _internal.fromfunc(name, None, [address], [list(dtypes)], inputs, outputs,
                                         [None], [library], _internal.PyUFunc_None, layout, ())
    return ufunc


@cache
def compile_numpy_function(function: str, arguments: tuple[np.dtype, ...], result: np.dtype,
                           symbol: str) -> tuple[bytes, str]:
    """``np.<function>`` compiled by numba for ``arguments``, once per process: the bitcode
    of numba's function and the IR of an adapter named ``symbol`` that takes the arguments
    and returns the result in registers (numba's own convention returns a status and the
    result through a pointer)."""
    from numba.core.registry import cpu_target

    names = [f"a{position}" for position in range(len(arguments))]
    namespace: dict[str, Any] = {"np": np}
    exec(f"def call({', '.join(names)}):\n"
         f"    return np.{function}({', '.join(names)})\n", namespace)
    argtypes = [numba.from_dtype(dtype) for dtype in arguments]
    restype = numba.from_dtype(result)
    dispatcher = numba.njit(error_model="numpy")(namespace["call"])
    dispatcher.compile(tuple(argtypes))
    compiled: Any = dispatcher.overloads[tuple(argtypes)]
    if compiled.signature.return_type != restype:  # pragma: no cover - numpy and numba agree
        raise TypeError(f"numba types np.{function}{tuple(arguments)} as "
                        f"{compiled.signature.return_type}, numpy as {result}")
    context = cpu_target.target_context
    module = ir.Module(name=symbol)
    callee = ir.Function(module, context.call_conv.get_function_type(restype, argtypes),
                         name=compiled.fndesc.llvm_func_name)
    adapter = ir.Function(module, ir.FunctionType(
        context.get_value_type(restype), [context.get_value_type(t) for t in argtypes]),
        name=symbol)
    adapter.linkage = "linkonce_odr"
    builder = ir.IRBuilder(adapter.append_basic_block("entry"))
    _, value = context.call_conv.call_function(builder, callee, restype, argtypes,
                                               list(adapter.args))
    builder.ret(value)
    with global_compiler_lock:
        bitcode = compiled.library._get_module_for_linking().as_bitcode()
    return bytes(bitcode), str(module)


def thread_count() -> int:
    """numba's thread count (``numba.set_num_threads`` / ``NUMBA_NUM_THREADS``), read
    without starting numba's own thread pool when nothing has started it yet."""
    from numba.np.ufunc import parallel

    if getattr(parallel, "_is_initialized", False):
        # its thread pool's own count, read directly: get_num_threads() takes numba's
        # start-up locks at every call (6x the time)
        count = getattr(parallel, "_get_num_threads", None)
        found = int(count()) if count is not None else 0
        return found if found > 0 else int(numba.get_num_threads())
    return int(setting("NUMBA_NUM_THREADS"))
