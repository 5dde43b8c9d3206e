"""Argument signatures, supported dtypes and NumPy 2 (NEP 50) scalar rules.

A *signature* decides when a jitted function recompiles.  For an array it is the dtype,
the number of dimensions and which dimensions have length 1 (the broadcast pattern); the
sizes of the other dimensions are free, so a new size never recompiles.  A Python scalar
(``bool``, ``int``, ``float``, ``complex``) is *weak*: only its kind matters and, as in
NumPy 2, it adopts the dtype of the arrays it meets (``float32_array * 3.5`` is float32).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .errors import ObjectValuesError, UnsupportedDtypeError

SUPPORTED_DTYPES: tuple[np.dtype, ...] = tuple(
    np.dtype(name)
    for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64", "complex64", "complex128",
    )
)
# float16 values are accepted, but no kernel computes with them (numpy computes float16 loops
# through float32, which kernels do not reproduce): elementwise work touching float16 runs as
# numpy calls (see trace.elementwise).
KERNEL_DTYPES = frozenset(SUPPORTED_DTYPES) - {np.dtype(np.float16)}
_SUPPORTED = frozenset(SUPPORTED_DTYPES)

# The dtype a weak Python scalar has when nothing else decides it.
WEAK_DEFAULT: dict[type, np.dtype] = {
    bool: np.dtype(bool),
    int: np.dtype(np.int64),
    float: np.dtype(np.float64),
    complex: np.dtype(np.complex128),
}

SHORT_NAMES: dict[np.dtype, str] = {
    np.dtype("bool"): "bool",
    np.dtype("int8"): "i8", np.dtype("int16"): "i16", np.dtype("int32"): "i32",
    np.dtype("int64"): "i64", np.dtype("uint8"): "u8", np.dtype("uint16"): "u16",
    np.dtype("uint32"): "u32", np.dtype("uint64"): "u64", np.dtype("float32"): "f32",
    np.dtype("float64"): "f64", np.dtype("complex64"): "c64", np.dtype("complex128"): "c128",
}


class ArgSpec(NamedTuple):
    """The signature of one argument.

    ``kind`` is ``"array"`` (an ndarray), ``"scalar"`` (a numpy scalar such as
    ``np.float32(1)``: a strong 0-d value), ``"weak"`` (a Python scalar), ``"items"`` (an
    array numpy made of a list or tuple of Python numbers of one type, whose items are
    Python numbers when the function takes them out) or ``"sequence"`` (an array numpy
    made of another list or tuple of numbers).  ``ones`` has
    one entry per dimension, True where that dimension has length 1.  ``sizes`` is the
    exact shape when the function reads sizes and is compiled per shape.
    """

    kind: str
    dtype: np.dtype
    ones: tuple[bool, ...]
    sizes: tuple[int, ...] | None = None  # the exact shape, for size-dependent functions
    # the Python type of each item ("int", "float") of an "items" list of both
    types: tuple[str, ...] | None = None

    @property
    def ndim(self) -> int:
        return len(self.ones)

    def describe(self) -> str:
        if self.kind == "weak":
            return f"Python {self.weak_type.__name__}"
        dims = ",".join(str(size) for size in self.sizes) if self.sizes is not None else \
            ",".join("1" if one else "n" for one in self.ones)
        what = "numpy scalar" if self.kind == "scalar" else \
            f"list of Python numbers, a {self.ndim}-d array" if self.kind == "items" else \
            f"list of numbers, a {self.ndim}-d array" if self.kind == "sequence" else \
            f"{self.ndim}-d array"
        return f"{what} {self.dtype}[{dims}]"

    @property
    def weak_type(self) -> type:
        for python_type, dtype in WEAK_DEFAULT.items():
            if dtype == self.dtype:
                return python_type
        raise AssertionError(self)


def compilable(dtype: np.dtype) -> bool:
    """Whether values of ``dtype`` (either byte order) can be traced and compiled."""
    return (dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype) in _SUPPORTED


def check_dtype(dtype: np.dtype, what: str) -> np.dtype:
    """Return ``dtype`` in native byte order, or raise if no kernel can handle it."""
    native = dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype
    if native not in _SUPPORTED:
        supported = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        if dtype.hasobject:
            raise ObjectValuesError(f"{what} has dtype object")
        raise UnsupportedDtypeError(
            f"{what} has dtype {dtype}, which numfuse cannot compile; "
            f"supported dtypes are {supported}. Convert it first (e.g. x.astype(np.float64))."
        )
    return native


def spec_of(value: Any, what: str = "argument") -> ArgSpec:
    """The signature of a call argument (an ndarray, numpy scalar or Python scalar)."""
    if isinstance(value, np.ndarray):
        dtype = value.dtype if value.dtype.isnative else check_dtype(value.dtype, what)
        if dtype not in _SUPPORTED:
            check_dtype(dtype, what)
        return ArgSpec("array", dtype, tuple(size == 1 for size in value.shape))
    if isinstance(value, np.generic):
        return ArgSpec("scalar", check_dtype(value.dtype, what), ())
    python_type = type(value)
    if python_type in WEAK_DEFAULT:
        return ArgSpec("weak", WEAK_DEFAULT[python_type], ())
    if isinstance(value, (int, float, complex)):
        # a subclass (an IntEnum, an IntFlag) is no Python scalar to numpy: strong, of
        # the dtype numpy converts it to
        return ArgSpec("scalar", check_dtype(np.asarray(value).dtype, what), ())
    raise TypeError(
        f"{what} of type {python_type.__name__} is not an array or number; pass a numpy "
        "array, a numpy scalar or a Python bool/int/float/complex (convert lists with "
        "np.asarray)."
    )


class Default:
    """A parameter the caller left to its default (``DEFAULT``): the function is traced
    without it, so its own default applies, whatever it is (numpy's ``np._NoValue``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"

    def __reduce__(self) -> str:
        return "DEFAULT"


DEFAULT = Default()


def is_setting(value: Any) -> bool:
    """Whether a call argument configures the function rather than being data: ``None``,
    a Python bool (``copy=True``), a string (``mode="same"``), a dtype or type, a ufunc,
    a parameter left to its default, a function, a slice, any object that is not data.
    Such arguments are passed as concrete values, one compilation per value."""
    return value is None or value is Ellipsis or isinstance(
        value, (bool, str, bytes, np.dtype, type, np.ufunc, Default)) or not _is_data(value)


def _is_data(value: Any) -> bool:
    """Whether a call argument is data numpy would compute with (an array, a number, a
    container of them, an array-like); anything else (a function, a slice, an options
    object, a list of names) configures the function."""
    if isinstance(value, (list, tuple)):
        return all(_is_data(item) for item in value)
    return isinstance(value, (np.ndarray, np.generic, int, float, complex,
                              dict)) or any(hasattr(type(value), name) for name in (
        "__array__", "__array_function__", "__array_interface__", "__array_struct__"))


def fast_key(value: Any) -> Any:
    """A cheap hashable stand-in for ``spec_of(value)`` used by the call path.

    Equal keys imply equal signatures; distinct keys may share one (byte order), which only
    costs a second lookup.  None means "use the slow path" (lists, unusual types).
    """
    kind = type(value)
    if kind is np.ndarray:
        shape = value.shape
        if 1 in shape:
            return (value.dtype, tuple(size == 1 for size in shape))
        return (value.dtype, len(shape))
    if kind is float or kind is int or kind is complex:
        return kind
    if kind is bool:  # a setting: its value selects the compilation
        return value
    if isinstance(value, np.generic):
        return ("scalar", value.dtype)
    return None


def as_operand(value: Any, what: str = "argument") -> Any:
    """Convert a call argument the way numpy converts ufunc operands.

    Arrays and scalars pass through; lists and tuples become arrays.
    """
    if isinstance(value, (np.ndarray, np.generic, bool, int, float, complex)):
        return value
    if isinstance(value, (list, tuple)) or hasattr(value, "__array__"):
        return np.asarray(value)
    raise TypeError(
        f"{what} of type {type(value).__name__} is not an array or number; pass a numpy "
        "array, a numpy scalar or a Python bool/int/float/complex."
    )


def weak_python_type(value: Any) -> type | None:
    """``int``/``float``/``complex``/``bool`` if ``value`` is a weak Python scalar (of
    that very type: numpy takes a subclass, an IntEnum, as a strong value)."""
    kind = type(value)
    return kind if kind in (bool, int, float, complex) else None


def overflows_in_cast(value: Any, dtype: np.dtype) -> bool:
    """Whether converting the float or complex number ``value`` to the float or complex
    ``dtype`` makes a finite part infinite (a Python ``1e300`` beside a float32 array:
    numpy's "overflow encountered in cast")."""
    source = np.asarray(value)
    if source.dtype.kind not in "fc" or dtype.kind not in "fc":
        return False
    with np.errstate(all="ignore"):
        converted = source.astype(dtype)
    pairs = ((source.real, converted.real), (source.imag, converted.imag))
    return any(bool(np.isfinite(before) and np.isinf(after)) for before, after in pairs)


def short_name(dtype: np.dtype) -> str:
    return SHORT_NAMES.get(dtype, str(dtype))
