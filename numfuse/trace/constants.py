"""Work on constants alone, evaluated with numpy at once, and its results wrapped as
constant tracers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dtypes import check_dtype
from ..graph import (
    CONST,
    Constant,
    Node,
)
from .nodes import const_node


def _constants_only(args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether the traced values among ``args`` and ``kwargs`` are all constants."""
    found = tracers_in((args, kwargs))
    return bool(found) and all(tracer.node.kind == CONST for tracer in found)


def _eager(fn: Callable[..., Any], args: Any, kwargs: dict[str, Any]) -> Any:
    """``fn`` on the values of constants, computed by numpy now as it would be without
    numfuse; a write into a constant (``a[0] = 1``, ``np.add.at(a, i, 1)``, ``a.fill(0)``)
    gives it the written value."""
    copies: list[tuple[Tracer, np.ndarray]] = []
    result = fn(*_unwrapped(tuple(args), copies),
                **{key: _unwrapped(value, copies) for key, value in kwargs.items()})
    for tracer, copy in copies:
        if copy.tobytes() != tracer.node.value.value.tobytes():
            if not tracer.writable:
                _inplace("writing into a constant a view was taken of")
            tracer.node = const_node(copy)
    return _wrapped(result, copies)


def _unwrapped(item: Any, copies: list[tuple[Tracer, np.ndarray]]) -> Any:
    """``item`` with the values of its constant tracers, an array's a copy noted in
    ``copies``.  (A function of the module, not a closure of ``_eager``: a closure calling
    itself is a reference cycle, which kept the tracers alive, and a view of a constant
    then seemed alive long after its statement.)"""
    if isinstance(item, Tracer):
        value = item.node.value.value
        if not isinstance(value, np.ndarray):
            return value
        copies.append((item, value.copy()))
        return copies[-1][1]
    if isinstance(item, list) or (isinstance(item, tuple) and not hasattr(item, "_fields")):
        return type(item)(_unwrapped(part, copies) for part in item)
    return item


def _wrapped(value: Any, copies: Sequence[tuple[Tracer, np.ndarray]]) -> Any:
    """numpy arrays in ``value`` as constant tracers (the tracer itself for an array written
    in place); a view of a constant makes both unwritable, as a write would have to reach
    the other."""
    for tracer, copy in copies:
        if value is copy:
            return tracer
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            return value
        shared = [tracer for tracer, copy in copies if np.may_share_memory(value, copy)]
        result = Tracer(const_node(value), owned=True)
        if shared:
            _share(shared, result)
        return result
    if isinstance(value, list) or (isinstance(value, tuple) and not hasattr(value, "_fields")):
        return type(value)(_wrapped(part, copies) for part in value)
    if isinstance(value, tuple):
        return type(value)(*(_wrapped(part, copies) for part in value))
    return value


def _as_array(name: str, original: Callable[..., Any], value: Tracer, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
    """``np.array(x)`` copies; ``np.asarray(x)`` is ``x`` itself (a numpy scalar or Python
    number becomes a 0-d array); a dtype casts.  Other options run numpy."""
    node = value.node
    options = dict(zip(("dtype",), args, strict=False)) | kwargs
    dtype = options.pop("dtype", None)
    copy = options.pop("copy", True if name == "array" else None)
    if isinstance(copy, np._CopyMode):  # numpy's enum (array-API code passes IF_NEEDED)
        copy = {np._CopyMode.ALWAYS: True, np._CopyMode.NEVER: False}.get(copy)
    order = memory_order(options.pop("order", None))
    if options.get("ndmin", 0) == 0 and options.get("subok", False) is False:
        options.pop("ndmin", None)
        options.pop("subok", None)
    layout = "F" if name == "asfortranarray" or order == "F" else \
        "C" if name == "ascontiguousarray" or order == "C" else None
    if options or len(args) > 1 or (name in ("ascontiguousarray", "asfortranarray")
                                    and node.ndim == 0) or (
            # numpy's layout: a copy of an argument or a view of one only when its layout
            # is not the one asked for (a value the function made is C-contiguous)
            node.ndim and ((layout == "F" and node.ndim > 1) or
                           (layout == "C" and not value.owned and copy is not True))):
        return record_call(original, name, (value, *args), kwargs)
    if dtype is not None and not np.dtype(dtype).isnative:  # numpy's array, byte-swapped
        return record_call(original, name, (value, *args), kwargs)
    target = node.dtype if dtype is None else check_dtype(np.dtype(dtype), f"np.{name} dtype")
    if node.weak and node.kind != CONST and target != node.dtype:
        # a Python number argument converted to a dtype: numpy's conversion, which raises
        # for a value out of its range (np.asarray(300, np.int8)), at call time
        return record_call(original, name, (value, *args), kwargs)
    if copy is False and target != node.dtype:
        raise ValueError("Unable to avoid copy while creating an array as requested.")
    if target != node.dtype:  # astype's cast (numpy's values, its ComplexWarning)
        cast = astype(value, target)
        return fresh_copy(cast.node, scalar=False) if cast.node.scalar else cast
    if copy or _immutable(node) or value.sequence:  # (a list argument: a new array)
        return fresh_copy(node, scalar=False)
    return value


def _checked_array(name: str, original: Callable[..., Any], value: Tracer, dtype: Any = None,
                   order: Any = None, requirements: Any = None, *, like: Any = None) -> Any:
    """``np.asarray_chkfinite(x)`` (numpy checks the values when it runs) and
    ``np.require(x, dtype, requirements)`` (numpy's call for an argument or a view of
    one, which it copies when the layout asks; a value numfuse makes is C-contiguous and
    owns its data)."""
    options = {} if dtype is None else {"dtype": dtype}
    wanted = {str(item).upper() for item in (
        [requirements] if isinstance(requirements, str) else requirements or ())}
    if name == "require" and wanted and (not value.owned or wanted & {
            "F", "F_CONTIGUOUS", "FORTRAN", "O", "OWNDATA"}):
        # numpy copies an argument (or a view of one) only when it lacks what is asked
        return record_call(original, name, (value,), {**options, "requirements": requirements})
    converted = _as_array("asarray", _CONVERSIONS["asarray"], value, (), options)
    if name == "asarray_chkfinite" and converted.node.dtype.kind in "fc":
        return record_call(original, name, (converted,), {})
    return converted


def _leaf_const(value: Any) -> Node:
    """A returned value that does not depend on the arguments: returned as numpy gave it."""
    return Node("const", CONST, (), np.dtype(object), (), Constant(_Opaque(value)))


class _Opaque:
    """A returned constant of any type, kept as is (copied on return if it is an array)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


# Imported last: these modules and this one use each other's functions at call time.
from .functions import _share, astype, fresh_copy, memory_order  # noqa: E402
from .patches import _CONVERSIONS  # noqa: E402
from .probes import record_call  # noqa: E402
from .tracer import Tracer, _immutable, _inplace, tracers_in  # noqa: E402
