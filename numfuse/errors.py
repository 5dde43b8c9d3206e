"""Exceptions whose messages say what to do instead.

Every error raised while tracing names the user's source line (when it can be found) so
the message points at the code to change, not at numfuse internals.
"""

from __future__ import annotations

import ast
import builtins
import contextvars
import dis
import linecache
import math
import os
import sys
import traceback
import types
from types import FrameType

import numpy as np

PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")


def in_numfuse(filename: str) -> bool:
    """Whether the source file ``filename`` is one of numfuse's own."""
    return os.path.abspath(filename).startswith(PACKAGE_DIR)


def outside_numfuse() -> int:
    """The ``stacklevel`` of a warning, given by the function calling this one, that names
    the innermost frame outside numfuse."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and in_numfuse(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def user_source_line() -> str:
    """The innermost stack frame outside numfuse and numpy, as ``file:line: code``.

    Used only to word error messages; it never influences what is traced.
    """
    for frame in reversed(traceback.extract_stack()):
        filename = os.path.abspath(frame.filename)
        if filename.startswith(PACKAGE_DIR) or "/numpy/" in filename:
            continue
        code = (frame.line or "").strip()
        return f"{frame.filename}:{frame.lineno}: {code}"
    return "<unknown location>"


def _outer_frame(frame: types.FrameType | None, past_numpy: bool = True
                 ) -> types.FrameType | None:
    """The first frame from ``frame`` outwards that is not numfuse's (nor numpy's, with
    ``past_numpy``)."""
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not (filename.startswith(PACKAGE_DIR) or (past_numpy and "/numpy/" in filename)):
            return frame
        frame = frame.f_back
    return None


def _user_frame() -> types.FrameType | None:
    return _outer_frame(sys._getframe(1))


def called_math_function() -> str | None:
    """The name of the ``math`` function the user's code is calling right now
    (``math.exp(x)``, or ``exp(x)`` after ``from math import exp``), else None.

    Read from the source span of the call instruction the user's frame is executing
    (Python 3.11 and later; None on 3.10 or when the source is not available).  Used only
    to word error messages.
    """
    frame = _user_frame()
    if frame is None:
        return None
    instruction = next((item for item in dis.get_instructions(frame.f_code)
                        if item.offset == frame.f_lasti), None)
    positions = getattr(instruction, "positions", None)
    if positions is None or None in (positions.lineno, positions.end_lineno,
                                     positions.col_offset, positions.end_col_offset):
        return None
    lines = [linecache.getline(frame.f_code.co_filename, number).encode()
             for number in range(positions.lineno, positions.end_lineno + 1)]
    lines[-1] = lines[-1][:positions.end_col_offset]  # offsets count UTF-8 bytes
    lines[0] = lines[0][positions.col_offset:]
    try:
        call = ast.parse(b"".join(lines).decode().strip(), mode="eval").body
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(call, ast.Call):
        return None

    def lookup(name: str) -> object:
        for namespace in (frame.f_locals, frame.f_globals, vars(builtins)):
            if name in namespace:
                return namespace[name]
        return None

    function = call.func
    if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
        if lookup(function.value.id) is math and callable(getattr(math, function.attr, None)):
            return function.attr
    elif isinstance(function, ast.Name):
        value = lookup(function.id)
        name = getattr(value, "__name__", None)
        if name is not None and value is getattr(math, name, None) and callable(value):
            return name
    return None


# math functions whose numpy namesakes compute something else (IEEE remainder vs floored)
_NOT_NUMPYS = frozenset({"remainder"})


def math_advice() -> str | None:
    """What to write instead when the user's code is calling a ``math`` function on a
    traced value (``math.exp(x)``: ``np.exp(x)``); None when it is not."""
    name = called_math_function()
    if name is None:
        return None
    head = (f"math.{name}() computes on Python numbers, but inside a numfuse function "
            "values are traced, not computed")
    if name not in _NOT_NUMPYS and callable(getattr(np, name, None)):
        return f"{head}. Use np.{name}(...) instead: it takes traced values and fuses."
    return (f"{head}, and numpy has no {name}() that matches it. Compute it outside the "
            "function and pass the result in, or write it with numpy functions.")


class NumfuseError(Exception):
    """Base class of every exception numfuse raises on its own behalf."""


class TracingError(NumfuseError, TypeError):
    """The traced function did something that needs a concrete value or is not supported.

    While a function is traced (``raised_while_tracing`` holds a list), each one raised on
    behalf of code outside numpy is noted there: a function that catches it (``try:
    bool(x) ... except Exception``, as scipy tells lazy arrays apart) would otherwise go on
    along a path numpy never takes, and its trace is not the function (``trace_graph``
    raises the first noted error if the function returns)."""

    def __init__(self, operation: str, advice: str) -> None:
        self.operation = operation
        self.location = user_source_line()
        super().__init__(f"{operation} at {self.location}\n  {advice}")
        noted = raised_while_tracing.get()
        if noted is not None and not _raised_for_numpy():
            noted.append(self)


# The errors raised while the current thread traces a function (see ``TracingError``).
raised_while_tracing: contextvars.ContextVar[list[TracingError] | None] = \
    contextvars.ContextVar("raised_while_tracing", default=None)


def _raised_for_numpy() -> bool:
    """Whether the innermost frame outside numfuse is numpy's (numpy handles the errors
    it provokes itself: a TypeError it catches decides its own path)."""
    frame = _outer_frame(sys._getframe(2), past_numpy=False)
    return frame is not None and "/numpy/" in os.path.abspath(frame.f_code.co_filename)


class ConcretizationError(TracingError):
    """A traced value was used where Python needs a concrete one (``if``, ``bool``, ``float``)."""


class StaticArgumentError(ConcretizationError):
    """A scalar argument is used where Python needs its value (``x[:n]``, ``range(n)``).

    ``arguments`` are the indices of the scalar arguments the value comes from;
    ``numfuse.jit`` handles it by passing them as concrete (static) values, compiling once
    per value.
    """

    def __init__(self, operation: str, advice: str, arguments: tuple[int, ...]) -> None:
        super().__init__(operation, advice)
        self.arguments = arguments


class SizeDependentError(ConcretizationError):
    """The function reads array sizes (``x.shape``, ``len(x)``, ``x.size``).

    ``numfuse.jit`` handles it by compiling such functions once per argument shape.
    """


class CallShapeError(NumfuseError, ValueError):
    """A numpy call returned another shape than tracing found for these argument sizes
    (``x[:3]`` of a shorter ``x``) or another dtype.

    ``numfuse.jit`` handles a shape by compiling the function once per argument shape; a
    call that still disagrees depends on the values and raises this.
    """


class UnsupportedOperationError(TracingError):
    """A numpy function, ufunc or dtype combination numfuse cannot compile."""


class SignatureMismatchError(NumfuseError, TypeError):
    """A ``Compiled`` function was called with arguments of another signature."""


class UnsupportedDtypeError(NumfuseError, TypeError):
    """An argument's dtype has no numfuse kernel (object, string, datetime, float16...)."""


class ObjectValuesError(UnsupportedDtypeError):
    """The function computes with values numpy keeps as Python objects (an integer beyond
    64 bits, a list numpy makes an array of dtype object): numpy's object loops, which no
    kernel computes.  A call of a jitted function then runs it with numpy (warning once);
    ``numfuse.compile`` raises this."""


class KernelCompileError(NumfuseError, RuntimeError):
    """A kernel failed to compile (a bug of numfuse: please report it with the kernel's
    source, ``Kernel.source``, which the message includes)."""


def source_line_from(frame: FrameType | None) -> str:
    """``user_source_line`` from ``frame`` outwards: the first frame outside numfuse and
    numpy, as ``file:line: code`` (for facts recorded while tracing, cheaply)."""
    frame = _outer_frame(frame)
    if frame is None:
        return "<unknown location>"
    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{frame.f_code.co_filename}:{frame.f_lineno}: {code}"


class NumpyFallbackWarning(RuntimeWarning):
    """A jitted function numfuse cannot compile for arguments of some kinds runs with
    numpy as written for them (numpy's result, not fused).  Made an error
    (``warnings.simplefilter("error", NumpyFallbackWarning)``), the call raises the
    reason instead."""
