"""Graph nodes of traced values: arguments, constants, and elementwise operations with the
dtypes numpy resolves for them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import kernel_lib
from ..calls import (
    TRACED,
    ElementwiseCall,
    NumpyCall,
)
from ..dtypes import KERNEL_DTYPES, ArgSpec, check_dtype, weak_python_type
from ..errors import (
    ObjectValuesError,
    UnsupportedOperationError,
    math_advice,
)
from ..graph import (
    CONST,
    ELEMENTWISE,
    INPUT,
    NUMPY,
    Argument,
    Call,
    Const,
    Constant,
    Loop,
    Node,
    Shape,
    broadcast_shapes,
)
from ..ops import OPS, DtypeOrWeak, OpDef, evaluate, template_for
from . import errstate


def input_node(index: int, spec: ArgSpec) -> Node:
    shape: Shape = spec.sizes if spec.sizes is not None else \
        tuple(1 if one else None for one in spec.ones)
    return Node("arg", INPUT, (), spec.dtype, shape, Argument(index),
                weak=spec.kind == "weak" and spec.dtype.kind != "b",
                scalar=spec.kind not in ("array", "items", "sequence"))


def const_node(value: Any) -> Node:
    """A graph constant for a Python number, numpy scalar, list or array."""
    weak = weak_python_type(value)
    if weak is not None:
        if weak is int and not -(2**63) <= value < 2**64:
            raise ObjectValuesError(f"the Python integer {value} is beyond 64 bits: numpy "
                                    "computes with it as a Python object (or a float)")
        dtype = np.dtype(bool) if weak is bool else np.asarray(weak(0)).dtype
        return Node("const", CONST, (), dtype, (), Constant(Const(weak(value))),
                    weak=True, scalar=True)
    if isinstance(value, np.generic):
        check_dtype(value.dtype, "constant")
        return Node("const", CONST, (), value.dtype, (), Constant(Const(value)),
                    scalar=True)
    array = np.asarray(value)
    check_dtype(array.dtype, f"constant {type(value).__name__}")
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    return Node("const", CONST, (), array.dtype, array.shape, Constant(Const(array)))


def _operand_type(node: Node) -> DtypeOrWeak:
    if node.weak:
        return {np.dtype(np.int64): int, np.dtype(np.float64): float,
                np.dtype(np.complex128): complex}.get(node.dtype, node.dtype)
    return node.dtype


def _sample(node: Node) -> Any:
    """A value numpy can use to check an operation: the constant itself, or a 0-d one."""
    if node.kind == CONST and node.ndim == 0:
        return node.value.value
    operand = _operand_type(node)
    if isinstance(operand, type):  # a weak Python scalar (bool nodes keep their dtype)
        return operand(1)
    return np.ones((), operand)


def _fits(value: int, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    return bool(info.min <= value <= info.max)


def _widen_comparison(op: OpDef, operands: Sequence[Node],
                      loop: tuple[np.dtype, ...]) -> tuple[np.dtype, ...]:
    """numpy compares an integer array with an out-of-range Python int exactly; widen the
    loop to 64 bits (mixed signed/unsigned loops are exact) so the constant fits."""
    if not op.comparison:
        return loop
    widened = list(loop)
    for position, node in enumerate(operands):
        if not (node.weak and node.dtype.kind == "i") or loop[position].kind not in "iu":
            continue
        if node.kind == CONST:
            value = node.value.value
            if _fits(value, loop[position]):
                continue
            widened[position] = np.dtype(np.int64) if value < 2**63 else np.dtype(np.uint64)
        else:  # a Python int argument: its value is only known at call time
            widened[position] = np.dtype(np.int64)
        for other, dtype in enumerate(loop):
            if other != position:
                widened[other] = np.dtype(np.uint64 if dtype.kind == "u" else np.int64)
    return tuple(widened)


def elementwise(op: OpDef, operands: Sequence[Node], *, out_dtype: Any = None,
                loop: tuple[tuple[np.dtype, ...], np.dtype] | None = None,
                weak: bool = False, scalar: bool = True, scalar_math: bool = False) -> Node:
    """Build one elementwise node with numpy's dtype resolution and broadcasting;
    ``scalar_math``: numpy computes it with its scalar math, not its ufunc loop (an
    operator on numpy scalars: ``x.max() ** 0.5`` takes ``pow``, not the loop's ``sqrt``)."""
    types = [_operand_type(node) for node in operands]
    resolved_here = loop is None
    if loop is None:
        if any(node.weak and node.kind == CONST for node in operands) or op.resolve is None:
            with np.errstate(all="ignore"):
                _check_with_numpy(op, operands, out_dtype)
        if out_dtype is not None:
            ufunc = op.reference
            assert isinstance(ufunc, np.ufunc)
            signature = (None,) * ufunc.nin + (np.dtype(out_dtype),) * ufunc.nout
            resolved = ufunc.resolve_dtypes(tuple(types) + (None,) * ufunc.nout,
                                            signature=signature)
            loop = (tuple(resolved[: len(operands)]), resolved[len(operands)])
        else:
            loop = op.loop_dtypes(types)
            if any(dtype.kind == "O" for dtype in (*loop[0], loop[1])):
                # Python ints among themselves resolve to object loops; use int64 like
                # numpy does once they are arrays.
                loop = op.loop_dtypes([node.dtype for node in operands])
    loop_in, out = loop
    loop_in = _widen_comparison(op, operands, loop_in)
    if scalar_math and op.name in ("multiply", "square") and loop_in[0].kind == "c":
        op = OPS["scalar_multiply"]  # numpy's scalar math: the products not fused
        if len(operands) == 1:  # (a square: its operand times itself)
            operands, loop_in = [operands[0]] * 2, (loop_in[0],) * 2
    power = op.name == "power" and loop_in[0].kind == "f" and not scalar_math
    if power and (exact := _scalar_power(operands[1], loop_in[1])) is not None:
        # numpy's power loop computes a scalar exponent of 0.5, 2, -1 or 1 exactly
        op = OPS[exact]
        operands, loop_in = operands[:1], loop_in[:1]
    elif power and resolved_here and operands[1].ndim == 0 and \
            operands[1].kind != CONST and operands[1].dtype.kind in "fiu":
        op = OPS["power_or_root"]  # the same, by the value the exponent has at each call
    for dtype in (*loop_in, out):
        if dtype.kind == "O":
            raise UnsupportedOperationError(
                f"np.{op.name} on {', '.join(str(t) for t in types)} needs an object loop",
                "numfuse compiles numeric dtypes only; convert the operands with np.asarray.",
            )
    half = any(dtype not in KERNEL_DTYPES for dtype in (*loop_in, out)) or any(
        node.dtype not in KERNEL_DTYPES and not node.weak for node in operands)
    if not half and template_for(op, loop_in) is None:
        raise NoKernelCodeError(
            f"np.{op.name} on dtypes {', '.join(str(t) for t in loop_in)}",
            "numfuse has no kernel code for this dtype combination; cast the operands "
            "(e.g. .astype(np.float64)) or compute this part outside the jitted function.",
        )
    shape = broadcast_shapes(*(node.shape for node in operands))
    if operands and out_dtype is None and all(node.kind == CONST for node in operands):
        # constants only (np.arange(5) * 2): numpy's value now, as it would compute it
        value = evaluate(op.name, out, [node.value.value for node in operands])
        if weak:
            value = np.asarray(value).item()
        elif not scalar or shape:
            value = np.asarray(value)
        return Node("const", CONST, (), out, np.shape(value), Constant(Const(value)),
                    weak=weak, scalar=scalar)
    if half:  # float16: numpy computes it (no kernel type), with the same loop dtypes
        call = NumpyCall(ElementwiseCall(op.name, op.reference, loop_in, out, scalar),
                         op.name, (TRACED,) * len(operands), {})
        return Node(op.name, NUMPY, tuple(operands), out, shape, Call(call),
                    weak=weak, scalar=scalar, errstate=errstate.current())
    return Node(op.name, ELEMENTWISE, tuple(operands), out, shape, Loop(tuple(loop_in)),
                weak=weak, scalar=scalar, errstate=errstate.current())


class NoKernelCodeError(UnsupportedOperationError):
    """An op table row has no scalar code for these loop dtypes."""


# The exponents numpy's float power loop computes exactly when given one for all elements
# (a stride-0 operand: a number, a numpy scalar, a 0-d array), and the ops it computes
_SCALAR_POWERS = {0.5: "sqrt", 2.0: "square", -1.0: "reciprocal", 1.0: "positive"}


def _scalar_power(node: Node, dtype: np.dtype) -> str | None:
    """The op numpy's power loop of ``dtype`` computes for the exponent ``node`` when it
    is a constant number (in ``dtype``) of ``_SCALAR_POWERS``, else None."""
    if node.kind != CONST or node.ndim != 0 or node.dtype.kind not in "fiub":
        return None
    with np.errstate(all="ignore"):
        value = float(np.asarray(node.value.value).astype(dtype))
    return _SCALAR_POWERS.get(value)


def _check_with_numpy(op: OpDef, operands: Sequence[Node], out_dtype: Any) -> None:
    """Let numpy raise what it would raise (OverflowError for out-of-range Python ints,
    UFuncTypeError for missing loops, ValueError for negative integer powers)."""
    samples = [_sample(node) for node in operands]
    kwargs = {"dtype": out_dtype} if out_dtype is not None else {}
    try:
        op.reference(*samples, **kwargs)
    except ValueError as error:
        # numpy raises for a negative integer power only when an element meets it (an
        # empty array does not); the kernel checks its elements and the runtime raises.
        if str(error) != kernel_lib.NEGATIVE_POWER_MESSAGE:
            raise


# ------------------------------------------------------------------------------ Tracer


def _advice_for(operation: str) -> str:
    return math_advice() or (
        f"{operation} needs a concrete value, but inside a numfuse function values are "
        "traced, not computed. Use np.where(cond, a, b) instead of if/else on array values, "
        "or pass the value as a static (non-array) Python argument computed outside."
    )
