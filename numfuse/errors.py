"""Exceptions whose messages say what to do instead.

Every error raised while tracing names the user's source line (when it can be found) so
the message points at the code to change, not at numfuse internals.
"""

from __future__ import annotations

import linecache
import os
import traceback
from types import FrameType

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def user_source_line() -> str:
    """The innermost stack frame outside numfuse and numpy, as ``file:line: code``.

    Used only to word error messages; it never influences what is traced.
    """
    for frame in reversed(traceback.extract_stack()):
        filename = os.path.abspath(frame.filename)
        if filename.startswith(_PACKAGE_DIR) or "/numpy/" in filename:
            continue
        code = (frame.line or "").strip()
        return f"{frame.filename}:{frame.lineno}: {code}"
    return "<unknown location>"


class NumfuseError(Exception):
    """Base class of every exception numfuse raises on its own behalf."""


class TracingError(NumfuseError, TypeError):
    """The traced function did something that needs a concrete value or is not supported."""

    def __init__(self, operation: str, advice: str) -> None:
        self.operation = operation
        self.location = user_source_line()
        super().__init__(f"{operation} at {self.location}\n  {advice}")


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


class KernelCompileError(NumfuseError, RuntimeError):
    """A kernel failed to compile (a bug of numfuse: please report it with the kernel's
    source, ``Kernel.source``, which the message includes)."""


def source_line_from(frame: FrameType | None) -> str:
    """``user_source_line`` from ``frame`` outwards: the first frame outside numfuse and
    numpy, as ``file:line: code`` (for facts recorded while tracing, cheaply)."""
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not (filename.startswith(_PACKAGE_DIR) or "/numpy/" in filename):
            code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            return f"{frame.f_code.co_filename}:{frame.f_lineno}: {code}"
        frame = frame.f_back
    return "<unknown location>"
