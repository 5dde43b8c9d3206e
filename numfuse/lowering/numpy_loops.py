"""numpy's own scalar functions of complex numbers, for kernels to call.

numpy computes most complex ufuncs (``exp``, ``log``, ``sqrt``, ``tanh``, ``power``...) with
one of its generic inner loops (``PyUFunc_D_D``, ``PyUFunc_FF_F``...), which calls, for
each element, a scalar C function of numpy's math library kept in the ufunc's ``data``
table: ``void f(c *in, c *out)`` or ``void f(c *in1, c *in2, c *out)``, ``c`` being
``{float, float}`` or ``{double, double}``.  A kernel that calls that function gets
numpy's values by construction, special values and extremes included (numba's complex
functions differ there: overflow to ``inf+infj`` where numpy keeps a finite part, NaN for
``tanh`` of a large real part...).

The function is found by reading the ufunc object's C structure (``PyUFuncObject``) with
ctypes.  Every assumption is checked first -- the header size, the counts of inputs,
outputs and loops, the loop's type numbers, and that the loop is the generic loop numpy
exports in its ``_UFUNC_API`` table -- so a numpy build laid out otherwise has no such
function for that ufunc and dtype (``function`` returns None) and the kernel computes it
another way.  The backend makes each function known to the JIT under ``symbol``
(``available()``), so compiled kernels name it and can be cached.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
from functools import cache

import numpy as np

# Entries of numpy's ``_UFUNC_API`` table: the generic loops calling a scalar function of
# complex numbers through pointers, by the loop's type characters.
_GENERIC_LOOPS = {"F->F": 9, "D->D": 10, "FF->F": 19, "DD->D": 18}
_COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))


@dataclasses.dataclass(frozen=True)
class NumpyFunction:
    """numpy's scalar C function computing ``np.<ufunc>`` for ``arguments`` (all of the
    result's dtype), called as ``symbol(&argument..., &result)``; it lives at
    ``address`` in numpy's extension module."""

    ufunc: str
    arguments: tuple[np.dtype, ...]
    address: int

    @property
    def result(self) -> np.dtype:
        return self.arguments[0]

    @property
    def symbol(self) -> str:
        tag = "_".join(dtype.str[1:] for dtype in self.arguments)
        return f"numfuse.numpy.{self.ufunc}.{tag}"


def function(name: str, arguments: tuple[np.dtype, ...]) -> NumpyFunction | None:
    """numpy's scalar function for ``np.<name>`` of ``arguments``, or None when numpy has
    none this module can call (not a ufunc, not a generic complex loop, mixed dtypes, or a
    numpy build whose structures are not the ones checked for)."""
    ufunc = getattr(np, name, None)
    if not isinstance(ufunc, np.ufunc) or not arguments or len(set(arguments)) != 1 or \
            arguments[0] not in _COMPLEX:
        return None
    return _functions_of(ufunc.__name__).get(tuple(arguments))


def available() -> dict[str, int]:
    """Every function this numpy offers: symbol -> address (for the JIT's symbol table)."""
    return {found.symbol: found.address for found in _all_functions()}


def key() -> str:
    """A digest of the functions' symbols: compiled kernels that call them are valid for
    processes that offer the same ones."""
    names = "\n".join(sorted(available()))
    return hashlib.sha256(names.encode()).hexdigest()[:16]


@cache
def _all_functions() -> tuple[NumpyFunction, ...]:
    ufuncs = sorted({value.__name__ for value in vars(np).values()
                     if isinstance(value, np.ufunc)})
    return tuple(found for name in ufuncs for found in _functions_of(name).values())


@cache
def _functions_of(name: str) -> dict[tuple[np.dtype, ...], NumpyFunction]:
    """The scalar functions of ``np.<name>``'s generic complex loops, by argument dtypes."""
    ufunc = getattr(np, name)
    structure = _structure(ufunc)
    generic = _generic_loops()
    if structure is None or not generic:
        return {}
    found = {}
    for index, signature in enumerate(ufunc.types):
        entry = _GENERIC_LOOPS.get(signature)
        if entry is None or generic.get(entry) != structure.functions[index]:
            continue
        if not _types_match(structure, index, signature):
            continue
        address = structure.data[index]
        if not address:
            continue
        dtypes = tuple(np.dtype(code) for code in signature.split("->")[0])
        found[dtypes] = NumpyFunction(name, dtypes, int(address))
    return found


def _ufunc_structure_type() -> type[ctypes.Structure]:
    """``PyUFuncObject`` up to its ``types`` field, after a Python object header of this
    interpreter's size (larger in debug and free-threaded builds)."""
    header = object.__basicsize__

    class UFuncObject(ctypes.Structure):
        _fields_ = [
            ("header", ctypes.c_byte * header),
            ("nin", ctypes.c_int), ("nout", ctypes.c_int), ("nargs", ctypes.c_int),
            ("identity", ctypes.c_int),
            ("functions", ctypes.POINTER(ctypes.c_void_p)),
            ("data", ctypes.POINTER(ctypes.c_void_p)),
            ("ntypes", ctypes.c_int), ("reserved1", ctypes.c_int),
            ("name", ctypes.c_char_p),
            ("types", ctypes.POINTER(ctypes.c_char)),
        ]

    return UFuncObject


def _structure(ufunc: np.ufunc) -> ctypes.Structure | None:
    """The ufunc's C structure, when its counts say it is laid out as expected (checked
    before any of its pointers is followed)."""
    if type(ufunc) is not np.ufunc or ufunc.signature is not None:
        return None
    structure = _ufunc_structure_type().from_address(id(ufunc))
    if (structure.nin, structure.nout, structure.nargs, structure.ntypes) != \
            (ufunc.nin, ufunc.nout, ufunc.nin + ufunc.nout, ufunc.ntypes):
        return None
    if not structure.functions or not structure.data or not structure.types or \
            structure.name != ufunc.__name__.encode():
        return None
    return structure


def _types_match(structure: ctypes.Structure, index: int, signature: str) -> bool:
    """Whether loop ``index``'s type numbers are those of ``signature`` ("DD->D")."""
    codes = signature.replace("->", "")
    start = index * len(codes)
    numbers = [structure.types[start + position][0] for position in range(len(codes))]
    return numbers == [np.dtype(code).num for code in codes]


@cache
def _generic_loops() -> dict[int, int]:
    """The addresses of the generic loops of ``_GENERIC_LOOPS`` (entry -> address), read
    from numpy's exported ``_UFUNC_API`` table; empty when it cannot be read."""
    try:
        capsule = np._core._multiarray_umath._UFUNC_API  # type: ignore[attr-defined]
    except AttributeError:
        return {}
    # Prototypes of their own: setting ``argtypes`` on ``ctypes.pythonapi``'s shared
    # function objects would change them for every other user in the process.
    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
        ("PyCapsule_GetName", ctypes.pythonapi))
    get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi))
    try:
        table = get_pointer(capsule, get_name(capsule))
    except (TypeError, ValueError):
        return {}
    if not table:
        return {}
    entries = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
    return {entry: int(entries[entry] or 0) for entry in _GENERIC_LOOPS.values()}
