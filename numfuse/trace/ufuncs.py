"""numpy ufuncs on traced values: dispatch, ``out=`` and ``where=``, in-place operators."""

from __future__ import annotations

import dataclasses
import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..calls import (
    TRACED,
    NumpyCall,
    PythonComplexOperator,
    Written,
    setitem_scalar,
)
from ..errors import (
    ConcretizationError,
    UnsupportedOperationError,
)
from ..graph import (
    CONST,
    NUMPY,
    Call,
    Node,
    Shape,
    shape_text,
)
from ..ops import ARITHMETIC, BY_UFUNC, FLAG_RAISING, MULTI_OUTPUT, OPS, OpDef
from . import errstate
from .nodes import NoKernelCodeError, _fits, _operand_type, _sample, const_node, elementwise


def _in_place(ufunc: np.ufunc, forward: Callable[[Any, Any], Any],
              symbol: str) -> Callable[..., Any]:
    """``x op= y``: numpy computes ``x op y`` into ``x`` (casting same_kind to x's dtype,
    never changing its shape); numpy scalars and Python numbers just rebind."""

    def method(self: Tracer, other: Any) -> Any:
        result = forward(self, other)
        if _immutable(self.node):
            return result
        # A += A.T: numpy reads a temporary view of the array itself before it writes
        if not self.writable and self.writable_from(other):
            return _store(ufunc, (self, other), result, self, checked=True)
        if not self.writable:
            # (a view of a constant the function made, np.zeros((4, 4))[1:], is one too)
            indexed = not self.owned and (self.node.op == "getitem" or
                                          self.node.kind == CONST) \
                and bool(self.bases) and all(base.owned for base in self.bases)
            if indexed and augmented_item(self):
                # y[1:] += v: the items of y[1:], computed as an in-place operator
                # computes them (numpy's casting and shape rules), which the item
                # assignment that follows writes into y
                return _store(ufunc, (self, other), result, Tracer(self.node, owned=True))
            if not self.owned and self.indexed_chain() is not None:
                # v = y[1:]; v += 1: the items computed so, written into v and through it
                # into y (when no other view of y is alive)
                stored = _store(ufunc, (self, other), result, Tracer(self.node, owned=True))
                if self.write_through(Ellipsis, stored):
                    return self
                indexed = True
            # (a view of an array the function made, by indexing or not: why numpy runs)
            self.refuse_view_write(f"in-place {symbol}", f"v {symbol} w",
                                   f"y[1:] {symbol} w")
            self.refuse_write_under_view(f"in-place {symbol}", f"y {symbol} w")
            return _inplace(symbol)
        return _store(ufunc, (self, other), result, self)

    return method


def _store(ufunc: np.ufunc, operands: Sequence[Any], result: Any, out: Any,
           mask: Any = True, casting: str = "same_kind", checked: bool = False,
           chosen: bool = False) -> Tracer:
    """``ufunc(*operands, out=out)`` given ``result = ufunc(*operands)``: ``out``, a fresh
    traced array, takes the result cast (by the rule ``casting``) to its dtype, keeping
    its shape (``checked``: its writability is known already; ``chosen``: the loop was
    chosen by ``dtype=`` or ``signature=``, and its result is what is cast)."""
    if isinstance(out, Tracer):
        if not (checked or out.writable) or _immutable(out.node):
            return _inplace(f"np.{ufunc.__name__}(..., out=x) or an augmented assignment")
        target_dtype, target_shape = out.node.dtype, out.node.shape
    elif isinstance(out, np.ndarray):
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__}(..., out=<numpy array>) or `+=` into a numpy array",
            "numfuse cannot write into an array it does not trace; make the array from a "
            "traced value (np.zeros_like(x), np.empty_like(x), x.copy()) or return the value.",
        )
    else:
        raise TypeError(f"return arrays must be of ArrayType, not {type(out).__name__}")
    node = _node(result)
    broadcasts = node.shape != tuple(target_shape) and \
        _broadcasts_into(node.shape, tuple(target_shape))
    if broadcasts and mask is True:
        mask = np.True_  # (numpy broadcasts the result into out: a choice of out's shape)
    if not broadcasts and not _fits_into(node.shape, tuple(target_shape)):
        raise ValueError(
            f"non-broadcastable output operand with shape {shape_text(target_shape)} "
            f"doesn't match the broadcast shape {shape_text(node.shape)}")
    free = [axis for axis, (size, goal) in enumerate(zip(node.shape, target_shape,
                                                         strict=False))
            if size is None and goal is not None]
    if not broadcasts and free:
        # a size of the arguments stored into an array of a fixed size (``out=np.zeros(3)``):
        # numpy's check needs the size, so the function compiles per shape
        Tracer(node)._sizes(f"np.{ufunc.__name__}(..., out=<array of a fixed size>)", free)
    if node.dtype != target_dtype and ufunc.nout == 1 and not chosen:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (its ComplexWarning: given at each call)
            # numpy's own casting error, if any
            probe = np.zeros((), target_dtype)
            ufunc(*(_sample(_node(operand)) for operand in operands), out=probe,
                  casting=casting)  # type: ignore[call-overload]
    elif not np.can_cast(node.dtype, target_dtype, casting):  # type: ignore[arg-type]
        raise TypeError(f"Cannot cast ufunc '{ufunc.__name__}' output from {node.dtype!r} to "
                        f"{np.dtype(target_dtype)!r} with casting rule '{casting}'")
    if node.dtype.kind == "c" and target_dtype.kind not in "cb":
        # numpy's cast, warning ComplexWarning at each call (``functions.astype``)
        stored = astype(Tracer(node), target_dtype).node
    else:
        stored = elementwise(OPS["astype"], [node], loop=((target_dtype,), target_dtype),
                             scalar=False)
    if mask is not True:
        # LLVM would simplify ``where(m, f(where(m, x, q)), out)`` to ``where(m, f(x), out)``
        # and compute f on the masked-off elements.  An array constant reaches the kernel as
        # an argument, so ``m ^ zeros`` is a condition from which LLVM cannot infer ``m``.
        ndim = max(_node(mask).ndim, len(target_shape))
        opaque = np.zeros((1,) * ndim, bool) if ndim else np.False_
        keep = apply_ufunc(np.logical_xor, (mask, opaque), {})
        stored = elementwise(OPS["where"], [_node(keep), stored, _node(out)], scalar=False)
    out.node = stored
    return out


def _broadcasts_into(shape: Shape, target: Shape) -> bool:
    """Whether a result of ``shape``, of fewer dimensions or of length 1 along some of
    them, broadcasts into an array of ``target``'s shape (``np.sqrt(b, out=z)`` of a
    number ``b``); free sizes match free sizes only."""
    if len(shape) > len(target):
        return False
    return all(size == 1 or size == goal
               for size, goal in zip(shape, target[len(target) - len(shape):], strict=True))


def _fits_into(shape: Shape, target: Shape) -> bool:
    """Whether a result of ``shape`` can be stored into an array of ``target``'s shape
    (a free size matches any size but 1, which is always known when tracing)."""
    return len(shape) == len(target) and all(
        size == goal or (None in (size, goal) and 1 not in (size, goal))
        for size, goal in zip(shape, target, strict=True))


def assign_item(target: Node, key: Any, value: Any) -> Node:
    """``x[key] = value`` on a fresh array: ``where(mask, value, x)`` for a traced boolean
    mask of x's shape and a scalar value of a kind x holds; otherwise numpy assigns into a
    copy at run time (its casting, broadcasting and errors)."""
    if isinstance(key, Tracer) and key.node.dtype == bool and key.node.shape == target.shape \
            and _fills_exactly(_node(value), target.dtype):
        filled = elementwise(OPS["astype"], [_node(value)],
                             loop=((_node(value).dtype,), target.dtype))
        return elementwise(OPS["where"], [key.node, filled, target], scalar=False)
    for part in key if isinstance(key, tuple) else (key,):
        if isinstance(part, slice):  # a traced bound (y[n:] = v): numpy needs its value
            for bound in (part.start, part.stop, part.step):
                if isinstance(bound, Tracer):
                    operator.index(bound)  # static for a number argument, else an error
    nodes = [target]
    static = (TRACED, _strip(key, nodes), _strip(value, nodes))
    scalar = isinstance(value, Tracer) and value.node.scalar and value.node.ndim == 0
    call = NumpyCall(Written(setitem_scalar if scalar else operator.setitem), "setitem",
                     static, {})
    # the array written keeps its shape, data-dependent sizes included (x[mask] written)
    return Node("setitem", NUMPY, tuple(nodes), target.dtype, target.shape,
                Call(call, _moving_axes(target)), scalar=False,
                errstate=errstate.current())


def _fills_exactly(value: Node, dtype: np.dtype) -> bool:
    """Whether storing the 0-d ``value`` into an array of ``dtype`` is a plain cast
    (no out-of-range Python int, no NaN into an integer...)."""
    if value.ndim != 0:
        return False
    if value.kind == CONST and value.weak:
        constant = value.value.value
        if isinstance(constant, bool):
            return True
        if isinstance(constant, complex):  # into a real array: numpy's TypeError
            return dtype == np.complex128
        if isinstance(constant, int) and dtype.kind in "iub":
            return dtype.kind in "iu" and _fits(constant, dtype)
        if dtype.kind not in "fc":
            return False
        # a finite value beyond the dtype's range: numpy's "overflow encountered in cast"
        part = dtype if dtype.kind == "f" else np.dtype(f"f{dtype.itemsize // 2}")
        return part.itemsize >= 8 or not math.isfinite(constant) or \
            abs(constant) <= float(np.finfo(part).max)
    return bool(np.can_cast(value.dtype, dtype, "safe"))


def _node(value: Any) -> Node:
    return value.node if isinstance(value, Tracer) else const_node(value)


def _fast_power(base: Tracer, exponent: Any) -> Tracer | None:
    """``ndarray ** scalar`` takes numpy's operator fast paths (square, sqrt, reciprocal):
    for float and complex arrays a Python ``-1``, ``2`` or ``0.5``; for other arrays a
    Python ``2`` only (where it matters for bool: ``square`` keeps int8, ``power`` makes
    int64)."""
    node = base.node
    if (node.scalar and node.ndim == 0) or node.dtype.kind not in "fcb":
        return None
    if isinstance(exponent, Tracer) and exponent.node.weak and exponent.node.kind != CONST \
            and node.dtype.kind in "cb" and (exponent.node.dtype.kind in "iu" or (
                node.dtype.kind == "c" and exponent.node.dtype.kind == "f")):
        # which path numpy takes depends on the number's value (for a complex array the
        # results differ, sqrt(-4+0j) is 2j exactly; for bool the dtype): it is needed,
        # and a number argument becomes static
        exponent = _concrete("z ** p for a complex or bool array z and a Python number p "
                             "(numpy takes sqrt, square or reciprocal for some values of p)",
                             exponent.node, lambda value: value.item())
    ufunc: np.ufunc
    if node.dtype.kind == "b":
        if type(exponent) is not int or exponent != 2:
            return None
        ufunc = np.square
    elif type(exponent) is int and exponent in (-1, 2):
        ufunc = np.reciprocal if exponent == -1 else np.square
    elif type(exponent) is float and exponent == 0.5:
        ufunc = np.sqrt
    else:
        return None
    return apply_ufunc(ufunc, (base,), {})


# Operators a Python complex computes itself when a numpy float64 scalar (a subclass of
# Python float) is on its right: numpy is never asked.
_PYTHON_COMPLEX: dict[np.ufunc, Callable[[Any, Any], Any]] = {
    np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul,
    np.true_divide: operator.truediv, np.power: operator.pow, np.equal: operator.eq,
    np.not_equal: operator.ne,
}


def _sequences_as_arrays(operands: Sequence[Any]) -> list[Any]:
    """The operands, a list or tuple holding traced values made an array as numpy makes
    one of it (``x * (a, 2.0)``)."""
    return [np.array(operand) if isinstance(operand, (list, tuple)) and has_tracer(operand)
            else operand for operand in operands]


def _check_not_caught(name: str, nodes: Sequence[Node]) -> None:
    """Raise where an ``except`` clause around this ufunc may catch an error numpy raises
    for it -- the FloatingPointError of ``np.errstate(...="raise")``, the ValueError of
    operands that may not broadcast or of an integer to a negative power, the
    OverflowError of a Python int argument beyond the dtype: the compiled kernel raises
    it when the function has returned, past the clause."""
    if all(node.kind == CONST for node in nodes):
        return  # computed now, by numpy: its error is raised here
    row = OPS[name]
    floats = any(node.dtype.kind in "fc" for node in nodes)
    integers = all(node.dtype.kind in "biu" for node in nodes)
    arrays = [node for node in nodes if node.ndim and node.kind != CONST]
    errors = []
    if row.category in FLAG_RAISING or (row.category is ARITHMETIC and floats):
        errors.append("FloatingPointError")
    if len({node.shape for node in arrays}) > 1 or (len(arrays) > 1 and None in (
            size for node in arrays for size in node.shape)) or (name == "power" and integers):
        errors.append("ValueError")
    if integers and any(node.weak and node.kind != CONST for node in nodes):
        errors.append("OverflowError")
    if errors and inside_try(errors):
        raise ConcretizationError(
            f"np.{row.reference.__name__} inside a try block catching "
            f"{' or '.join(errors)}",
            "an error it raises when the compiled function runs (FloatingPointError under "
            "np.errstate(...='raise'), ValueError for shapes that do not broadcast) could "
            "not reach the function's except clause; compute it outside the try block, or "
            "test the values (np.isfinite) or shapes instead of catching the error.")


def _operator(ufunc: np.ufunc, *operands: Any) -> Any:
    """A Python operator: like the ufunc, but Python-scalar-only results stay weak."""
    if _python_sequence_operator(ufunc, operands):
        raise ConcretizationError(
            f"Python's {_OPERATOR_SYMBOLS.get(ufunc, ufunc.__name__)} on a list or tuple "
            "argument",
            "a list joins, repeats or compares as a list (numpy would not see it): numpy "
            "runs this function as written; to fuse it, make the argument an array "
            "(np.asarray) or build the list outside the jitted function.")
    if _constants_only(operands, {}):
        return _eager(ufunc, operands, {})
    operands = tuple(_sequences_as_arrays(operands))
    nodes = [_node(operand) for operand in operands]
    left, right = nodes[0], nodes[-1]
    if ufunc in _PYTHON_COMPLEX and left.weak and left.dtype.kind == "c" and \
            not right.weak and right.scalar and right.ndim == 0 and right.dtype == np.float64:
        result = record_call(PythonComplexOperator(_PYTHON_COMPLEX[ufunc]),
                             f"complex.{ufunc.__name__}", operands, {})
        result.node = dataclasses.replace(result.node, weak=True)
        return result
    row = BY_UFUNC[ufunc]
    _check_not_caught(row.name, nodes)
    if ufunc in _ORDERINGS and len(nodes) == 2 and _complex_scalar_math(row, nodes):
        return _lexicographic(ufunc, nodes, row.loop_dtypes(
            [_operand_type(node) for node in nodes])[0][0])
    weak = all(node.weak for node in nodes)
    # numpy scalars (no 0-d array among them) compute with numpy's scalar math
    scalar_math = not weak and all(node.ndim == 0 and (node.scalar or node.weak)
                                   for node in nodes)
    return Tracer(elementwise(row, nodes, weak=weak, scalar_math=scalar_math), owned=True)


_ORDERINGS = (np.less, np.less_equal, np.greater, np.greater_equal)
_OPERATOR_SYMBOLS: dict[Any, str] = {
    np.add: "+", np.multiply: "*", np.equal: "==", np.not_equal: "!=", np.less: "<",
    np.less_equal: "<=", np.greater: ">", np.greater_equal: ">="}


def _python_sequence_operator(ufunc: np.ufunc, operands: Sequence[Any]) -> bool:
    """Whether Python's own operator applies to ``operands`` of a Python operator: a list
    or tuple among them (a constant, or a list argument of Python numbers, traced as an
    array) and nothing numpy's operator takes it over with: an array, or a numpy scalar
    (not for ``*``, where an integer one repeats the list and a float one raises)."""
    if not any(isinstance(operand, (list, tuple)) or
               (isinstance(operand, Tracer) and operand.sequence) for operand in operands):
        return False
    for operand in operands:
        if isinstance(operand, np.ndarray):
            return False
        if isinstance(operand, Tracer) and not operand.sequence and \
                not operand.node.weak and (not operand.node.scalar or ufunc is not np.multiply):
            return False
        if isinstance(operand, np.generic) and ufunc is not np.multiply:
            return False
    return True


def _complex_scalar_math(row: OpDef, nodes: Sequence[Node]) -> bool:
    """Whether numpy compares these operands with its complex scalar math: numpy scalars
    or Python numbers (not 0-d arrays), one a complex numpy scalar of the loop's dtype."""
    if any(node.ndim or not (node.scalar or node.weak) for node in nodes) or \
            all(node.weak for node in nodes):
        return False
    loop = row.loop_dtypes([_operand_type(node) for node in nodes])[0][0]
    return loop.kind == "c" and any(not node.weak and node.dtype == loop for node in nodes)


def _lexicographic(ufunc: np.ufunc, nodes: Sequence[Node], loop: np.dtype) -> Tracer:
    """numpy's complex scalar comparison: the real parts, then the imaginary parts on a
    tie, with no NaN test (``np.complex64(3+nanj) > 0`` is True, as an array it is
    False)."""
    first, second = (Tracer(node) for node in nodes)
    if ufunc in (np.greater, np.greater_equal):
        first, second = second, first
    first, second = astype(first, loop), astype(second, loop)
    tie = np.less if ufunc in (np.less, np.greater) else np.less_equal
    return (first.real < second.real) | ((first.real == second.real) &
                                         tie(first.imag, second.imag))


def apply_ufunc(ufunc: np.ufunc, inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """``ufunc(*inputs, **kwargs)``, including ``out=`` (see ``_store``) and ``where=`` with
    ``out=`` (the masked-off elements keep ``out``'s values and raise no warnings)."""
    kwargs = dict(kwargs)
    inputs = _sequences_as_arrays(inputs)
    out = kwargs.pop("out", None)
    where = kwargs.pop("where", True)
    casting = kwargs.get("casting", "same_kind")  # of the operands, and of the outputs
    outs = out if isinstance(out, tuple) else (out,) * ufunc.nout
    if where is not True:
        mask_dtype = _node(where).dtype if isinstance(where, Tracer) else \
            np.asarray(where).dtype
        if not np.can_cast(mask_dtype, bool, "safe"):
            raise TypeError(f"Cannot cast array data from {mask_dtype!r} to dtype('bool') "
                            "according to the rule 'safe'")
        if any(target is None for target in outs):
            raise UnsupportedOperationError(
                f"np.{ufunc.__name__}(..., where=...) without out=",
                "numpy leaves the masked-off elements uninitialised; pass out= (for example "
                "out=np.zeros_like(x)) or use np.where(mask, value, other).",
            )
        inputs = _quiet_where(ufunc, inputs, where)
    chosen = kwargs.get("dtype") is not None or kwargs.get("signature") is not None
    results = _compute_ufunc(ufunc, inputs, kwargs)
    if all(target is None for target in outs):
        return results
    listed = (results,) if ufunc.nout == 1 else tuple(results)
    stored = tuple(result if target is None else
                   _store(ufunc, inputs, result, target, where, casting, chosen=chosen)
                   for result, target in zip(listed, outs, strict=True))
    return stored[0] if ufunc.nout == 1 else stored


def _quiet_where(ufunc: np.ufunc, inputs: Sequence[Any], mask: Any) -> list[Any]:
    """The operands with masked-off elements replaced by a value on which ``ufunc`` raises
    no floating-point error, as numpy never computes those elements.  A traced Python
    float stays weak, as numpy converts it to the loop's dtype (masked as a float64 array,
    the loop numpy's for a float32 array had been float64); a traced Python int is left
    as it is (numpy's OverflowError for one beyond an int8 array's range is checked on
    the argument), and so is a Python number of the function."""
    def masked(operand: Any) -> bool:
        return isinstance(operand, np.ndarray) or (isinstance(operand, Tracer) and (
            not operand.node.weak or operand.node.dtype.kind in "fc"))

    arrays = [operand for operand in inputs if masked(operand)]
    dtypes = [_node(operand).dtype for operand in arrays]
    for candidate in (1, 2, 0, 3):
        quiet = [dtype.type(candidate) for dtype in dtypes]
        samples = iter(quiet)
        try:
            with np.errstate(all="raise"), warnings.catch_warnings():
                warnings.simplefilter("error")
                ufunc(*(next(samples) if masked(operand) else
                        operand.node.dtype.type(1) if isinstance(operand, Tracer) else operand
                        for operand in inputs))
        except Exception:
            continue
        break
    replacements = iter(quiet)
    return [_weak_as(operand, where(mask, operand, next(replacements))) if masked(operand)
            else operand for operand in inputs]


def _weak_as(operand: Any, masked: Tracer) -> Tracer:
    """``masked``, weak when ``operand`` is (a Python number argument)."""
    if isinstance(operand, Tracer) and operand.node.weak:
        masked.node = dataclasses.replace(masked.node, weak=True)
    return masked


def together(*parts: Any) -> tuple[Any, ...]:
    """The outputs of one numpy loop (``np.divmod``'s quotient and remainder), each kept
    with the others where they are float (a function using one alone still raises the
    flags numpy's loop raises computing both)."""
    if len(parts) < 2 or not all(isinstance(part, Tracer) and part.node.dtype.kind == "f"
                                 and not part.node.weak for part in parts):
        return parts
    kept = []
    for part in parts:
        node = part.node
        for other in parts:
            if other is not part:
                node = elementwise(OPS["kept"], [node, other.node], scalar=part.node.scalar)
        kept.append(Tracer(node, owned=True))
    return tuple(kept)


def _compute_ufunc(ufunc: np.ufunc, inputs: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    if (ufunc not in BY_UFUNC and ufunc not in MULTI_OUTPUT) or \
            kwargs.get("casting", "same_kind") != "same_kind" or \
            kwargs.get("signature") is not None:
        # numpy casts the operands as the casting rule allows, or picks the loop the
        # signature names (its operands' dtypes too): a numpy call
        return record_call(ufunc, ufunc.__name__, inputs, kwargs)
    out_dtype = kwargs.pop("dtype", None)
    kwargs.pop("signature", None)
    kwargs.pop("casting", None)
    if kwargs.get("order", "K") in ("C", "c", "K", "k", "A", "a", None):
        kwargs.pop("order", None)  # (the memory order of results numfuse makes: C)
    if kwargs.get("subok", True) is True:
        kwargs.pop("subok", None)
    if kwargs:
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__}(..., {', '.join(kwargs)}=...)",
            "numfuse supports the dtype=, out= and where= keywords of ufuncs.",
        )
    nodes = [_node(value) for value in inputs]
    _check_not_caught(MULTI_OUTPUT[ufunc][0] if ufunc in MULTI_OUTPUT else BY_UFUNC[ufunc].name,
                      nodes)
    if ufunc in MULTI_OUTPUT:
        return together(*(Tracer(elementwise(OPS[name], nodes, out_dtype=out_dtype),
                                 owned=True) for name in MULTI_OUTPUT[ufunc]))
    try:
        # np.square of a numpy scalar is numpy's scalar math (np.multiply of two is not)
        scalar_math = ufunc is np.square and nodes[0].scalar and nodes[0].ndim == 0
        return Tracer(elementwise(BY_UFUNC[ufunc], nodes, out_dtype=out_dtype,
                                  scalar_math=scalar_math), owned=True)
    except NoKernelCodeError:
        # no kernel code for these dtypes: numpy runs the ufunc as a call
        return record_call(ufunc, ufunc.__name__, inputs,
                           {} if out_dtype is None else {"dtype": out_dtype})


# Imported last: these modules and this one use each other's functions at call time.
from .constants import _constants_only, _eager  # noqa: E402
from .functions import astype, where  # noqa: E402
from .probes import _moving_axes, _strip, inside_try, record_call  # noqa: E402
from .tracer import (  # noqa: E402
    Tracer,
    _concrete,
    _immutable,
    _inplace,
    augmented_item,
    has_tracer,
)

for _name, _ufunc, _symbol in (
        ("add", np.add, "+="), ("sub", np.subtract, "-="), ("mul", np.multiply, "*="),
        ("truediv", np.true_divide, "/="), ("floordiv", np.floor_divide, "//="),
        ("mod", np.remainder, "%="), ("pow", np.power, "**="), ("and", np.bitwise_and, "&="),
        ("or", np.bitwise_or, "|="), ("xor", np.bitwise_xor, "^="),
        ("lshift", np.left_shift, "<<="), ("rshift", np.right_shift, ">>=")):
    setattr(Tracer, f"__i{_name}__",
            _in_place(_ufunc, getattr(Tracer, f"__{_name}__"), _symbol))
