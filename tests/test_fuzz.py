"""Differential fuzzing: random programs run by numfuse and by numpy must agree.

A program is a random DAG over the op table (``numfuse.ops.OPS``), Python scalars and the
non-fusible numpy operations numfuse supports (reductions over any axis, reshapes, matmul,
indexing, concatenation, masks and ``unique``, whose sizes depend on the values...), ops
guarded by ``np.where`` (on their input or on their result), ops inside an
``np.errstate`` block, and writes at a fixed index, on arguments of mixed dtypes and
broadcasting shapes filled with edge values (NaN, ±inf, -0.0, integer extremes,
subnormals, huge and tiny magnitudes, complex numbers with extreme parts) in several memory
layouts.  Every value the
program computes is returned, so nothing is eliminated.

Compared with numpy: the type, dtype and shape of every result; the values bit for bit for
exact operations, within a few ulp for a transcendental operation applied to exactly
computed operands, and within ``count * eps * sum(|x|)`` for float reductions and matmul
(numpy sums pairwise, a fused reduction may not); values computed *from* such inexact
values are compared by dtype and number of dimensions only (one ulp can flip a comparison,
and so the size of ``x[x > 0]``).  The
RuntimeWarnings (divide by zero, overflow, invalid value) raised inside the same
``np.errstate`` must match too, for programs on real dtypes whose values are all compared
exactly or to an ulp.

CI runs a few examples; ``NUMFUSE_FUZZ_EXAMPLES=10000 python -m pytest tests/test_fuzz.py``
runs more (``NUMFUSE_FUZZ_SEED`` fixes the seed).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from conftest import assert_same

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_ops import edge_values  # noqa: E402

import numfuse  # noqa: E402
from numfuse.ops import OPS, Exactness  # noqa: E402

EXAMPLES = int(os.environ.get("NUMFUSE_FUZZ_EXAMPLES", "25"))

DTYPES = [np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
)]
# Real floats and int64 are what most code uses: draw them more often.
COMMON = [np.dtype(name) for name in ("float64", "float64", "float32", "int64", "int32")]
ROWS = sorted(name for name in OPS if name not in ("astype", "real", "imag"))

EXACT, ULP, SUM, LOOSE = "exact", "ulp", "sum", "loose"
# fmax/fmin of +0.0 and -0.0: numpy returns the first operand in its scalar loop (fewer
# than 8 elements) and the second in its SIMD loop; numfuse the second (README, limits).
# clip's zero ties likewise depend on numpy's loop.
TIE = "tie"

# ------------------------------------------------------------------------------ programs


@dataclasses.dataclass(frozen=True)
class Step:
    """One operation: ``kind`` names how ``apply`` runs it, ``operands`` index the pool
    (arguments first, then the results of earlier steps), ``extra`` holds static values."""

    kind: str
    name: str
    operands: tuple[int, ...]
    extra: tuple[Any, ...] = ()

    def __str__(self) -> str:
        extra = f" {self.extra}" if self.extra else ""
        return f"{self.kind}:{self.name}{list(self.operands)}{extra}"


def _reduce(name: str) -> Callable[..., Any]:
    return lambda x, axis: getattr(np, name)(x, axis=axis)


NUMPY_CALLS: dict[str, Callable[..., Any]] = {
    **{name: _reduce(name) for name in ("sum", "prod", "max", "min", "mean", "any", "all",
                                        "argmax", "cumsum")},
    "reshape": lambda x: x.reshape(-1),
    "transpose": lambda x: x.T,
    "flip": lambda x: np.flip(x, axis=-1),
    "first": lambda x: x[0],
    "every_other": lambda x: x[..., ::2],
    "new_axis": lambda x: x[:, None],
    "concatenate": lambda x, y: np.concatenate([x, y], axis=-1),
    "stack": lambda x, y: np.stack([x, y]),
    "matmul": lambda x, y: x @ y,
    "sort": lambda x: np.sort(x, axis=-1),
    # sizes that depend on the values
    "positive": lambda x: x[x > 0],
    "masked": lambda x, y: x[y != 0],
    "nonzero": lambda x: np.nonzero(x)[-1],
    "unique": lambda x: np.unique(x),
}
# An op whose input or whose result is chosen by np.where(condition > 0, ...).
GUARDED = ("guarded_input", "guarded_result")
# Steps that apply one op row (under a guard or an errstate block).
OP_LIKE = ("op", *GUARDED, "errstate")
# Parts of complex arguments that reach the special cases of complex functions: overflow
# thresholds of exp/cosh/sinh/tanh in both precisions, the largest finite values, tiny.
COMPLEX_PARTS = (0.0, -0.0, 1e-30, 45.0, -45.0, 89.5, -89.5, 710.0, -710.0, 1e30, 3e38,
                 -3e38, 1e308, -1e308, np.inf, -np.inf, np.nan)

# Results numpy computes by summing: compared within count * eps * sum(|x|).
SUMMED = frozenset({"sum", "mean", "cumsum", "matmul", "prod"})


def apply(step: Step, pool: Sequence[Any]) -> Any:
    """Run one step with numpy semantics (numfuse traces the very same code)."""
    operands = [pool[index] for index in step.operands]
    if step.kind == "op":
        return OPS[step.name].reference(*operands, *step.extra)
    if step.kind in GUARDED:  # the last operand is the guard's condition
        reference, condition = OPS[step.name].reference, operands[-1] > 0
        if step.kind == "guarded_result":
            return np.where(condition, reference(*operands[:-1]), 0)
        return reference(np.where(condition, operands[0], 1), *operands[1:-1])
    if step.kind == "errstate":
        with np.errstate(all=step.extra[0]):
            return OPS[step.name].reference(*operands)
    if step.kind == "setitem":
        written = np.array(operands[0], copy=True)
        written[0] = step.extra[0]
        return written
    if step.kind == "scalar":  # a Python scalar constant on either side
        (value, left), = (step.extra,)
        reference = OPS[step.name].reference
        return reference(value, operands[0]) if left else reference(operands[0], value)
    if step.kind == "astype":
        return operands[0].astype(step.extra[0])
    if step.kind == "operator":
        return _OPERATORS[step.name](*operands)
    call = NUMPY_CALLS[step.name]
    return call(*operands, *step.extra)


_OPERATORS: dict[str, Callable[..., Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b, "<": lambda a, b: a < b, "==": lambda a, b: a == b,
    "&": lambda a, b: a & b, "neg": lambda a: -a, "abs": lambda a: abs(a),
    "~": lambda a: ~a,
}


def make_function(steps: Sequence[Step], n_args: int) -> Callable[..., Any]:
    """The program as a Python function returning every value it computes."""
    def program(*args: Any) -> tuple[Any, ...]:
        pool = list(args)
        for step in steps:
            pool.append(apply(step, pool))
        return tuple(pool[n_args:])
    return program


# ------------------------------------------------------------------------------ strategies


def _values(dtype: np.dtype) -> st.SearchStrategy[Any]:
    edges = edge_values(dtype).tolist()
    extra: list[Any] = []
    if dtype.kind == "f":
        info = np.finfo(dtype)
        extra = [float(info.tiny), float(info.smallest_subnormal), float(info.max),
                 -float(info.max), float(info.eps)]
        return st.one_of(st.sampled_from(edges + extra),
                         st.floats(width=8 * dtype.itemsize, allow_subnormal=True))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.one_of(st.sampled_from(edges),
                         st.integers(int(info.min), int(info.max)))
    if dtype.kind == "c":
        extreme = st.builds(complex, st.sampled_from(COMPLEX_PARTS),
                            st.sampled_from(COMPLEX_PARTS))
        return st.one_of(st.sampled_from(edges), extreme)
    return st.sampled_from(edges)


@st.composite
def arrays(draw: Any, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape))
    values = draw(st.lists(_values(dtype), min_size=size, max_size=size))
    with np.errstate(all="ignore"):
        array = np.array(values, dtype=dtype).reshape(shape)
    layout = draw(st.sampled_from(["C", "C", "C", "F", "reversed", "strided", "readonly",
                                   "big-endian"]))
    if layout == "F":
        return np.asfortranarray(array)
    if layout == "reversed" and array.ndim:
        return np.ascontiguousarray(array[..., ::-1])[..., ::-1]
    if layout == "strided" and array.ndim:
        wide = np.repeat(array, 2, axis=-1)
        return wide[..., ::2]
    if layout == "readonly":
        array.flags.writeable = False
    if layout == "big-endian" and dtype.itemsize > 1:
        return array.astype(dtype.newbyteorder(">"))
    return array


@st.composite
def arguments(draw: Any) -> list[Any]:
    ndim = draw(st.integers(0, 3))
    base = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=ndim,
                               max_size=ndim)))
    count = draw(st.integers(1, 3))
    args: list[Any] = []
    for _ in range(count):
        kind = draw(st.sampled_from(["array"] * 6 + ["python", "numpy-scalar"]))
        dtype = draw(st.one_of(st.sampled_from(COMMON), st.sampled_from(DTYPES)))
        if kind == "python":
            args.append(draw(st.sampled_from([2.5, -1.0, 0.0, 3, -2, 0, 1, True, 1.5j,
                                              float("nan"), float("inf")])))
            continue
        if kind == "numpy-scalar":
            args.append(draw(arrays(dtype, ()))[()])
            continue
        drop = draw(st.integers(0, ndim))
        shape = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else size
                      for size in base[drop:])
        args.append(draw(arrays(dtype, shape)))
    return args


def _is_python_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic)


def _is_0d_result(value: Any) -> bool:
    return isinstance(value, np.generic)


def _candidate(draw: Any, pool: Sequence[Any]) -> Step:
    """A random step over the pool; it may be invalid (numpy decides, see ``programs``)."""
    def pick() -> int:
        return draw(st.integers(0, len(pool) - 1))

    kind = draw(st.sampled_from(["op"] * 8 + ["scalar", "operator", "operator", "astype",
                                              "call", "call", "call", *GUARDED,
                                              "errstate", "setitem"]))
    if kind == "op":
        name = draw(st.sampled_from(ROWS))
        return Step("op", name, tuple(pick() for _ in range(OPS[name].arity)))
    if kind in GUARDED:
        name = draw(st.sampled_from(ROWS))
        return Step(kind, name, tuple(pick() for _ in range(OPS[name].arity + 1)))
    if kind == "errstate":
        name = draw(st.sampled_from(ROWS))
        mode = draw(st.sampled_from(["ignore", "warn", "raise"]))
        return Step(kind, name, tuple(pick() for _ in range(OPS[name].arity)), (mode,))
    if kind == "setitem":
        value = draw(st.sampled_from([0, 2, -1, 0.5, float("nan"), True]))
        return Step(kind, "setitem", (pick(),), (value,))
    if kind == "scalar":
        name = draw(st.sampled_from([row for row in ROWS if OPS[row].arity == 2]))
        value = draw(st.sampled_from([2, -1, 0, 3, 127, 255, 1000, 2**40, 0.5, -2.5, 1e300,
                                      float("nan"), True, 2j]))
        return Step("scalar", name, (pick(),), ((value, draw(st.booleans())),))
    if kind == "operator":
        name = draw(st.sampled_from(sorted(_OPERATORS)))
        arity = 1 if name in ("neg", "abs", "~") else 2
        return Step("operator", name, tuple(pick() for _ in range(arity)))
    if kind == "astype":
        return Step("astype", "astype", (pick(),), (draw(st.sampled_from(DTYPES)),))
    name = draw(st.sampled_from(sorted(NUMPY_CALLS)))
    if name in ("concatenate", "stack", "matmul", "masked"):
        return Step("call", name, (pick(), pick()))
    if name in ("sum", "prod", "max", "min", "mean", "any", "all", "argmax", "cumsum"):
        axis = draw(st.sampled_from([None, 0, -1]))
        return Step("call", name, (pick(),), (axis,))
    return Step("call", name, (pick(),))


def _try(step: Step, pool: Sequence[Any]) -> Any:
    """numpy's result of ``step``, or None when numpy refuses it (or it needs float16)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = apply(step, pool)
        except Exception:
            return None
    leaves = result if isinstance(result, tuple) else (result,)
    for leaf in leaves:
        dtype = getattr(leaf, "dtype", None)
        if dtype is None and not isinstance(leaf, (bool, int, float, complex)):
            return None
        if dtype is not None and (dtype == np.float16 or dtype.kind not in "biufc"):
            return None
    if step.kind in OP_LIKE:  # numfuse has no kernel for float16 loops (documented)
        operands = [pool[index] for index in step.operands][:OPS[step.name].arity]
        try:
            loop, _out = OPS[step.name].loop_dtypes(
                [_dtype_or_weak(operand) for operand in operands])
        except Exception:
            return None
        if np.dtype(np.float16) in loop:
            return None
    return result


def _dtype_or_weak(value: Any) -> Any:
    if isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic):
        return type(value) if type(value) is not bool else np.dtype(bool)
    return np.asarray(value).dtype.newbyteorder("=")


# Operations LLVM can prove constant, so that later float operations on them are folded:
# on one value twice (x < x is False, NaN or not) and on integers (isinf is False).
_FALSE_ON_SAME = frozenset({"logical_xor", "less", "greater", "<"})
_CONSTANT_ON_INTEGERS = frozenset({"isinf", "isnan", "isfinite"})


@st.composite
def programs(draw: Any) -> tuple[list[Step], list[Any]]:
    args = draw(arguments())
    pool: list[Any] = list(args)
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 10))):
        step = _candidate(draw, pool)
        if step.kind == "call" and any(index >= len(args) and _is_0d_result(pool[index])
                                       for index in step.operands):
            continue  # README limit: a numpy call sees a 0-d array for a numpy scalar
        if step.kind == "operator" and all(_is_python_scalar(pool[index])
                                           for index in step.operands):
            continue  # README limit: Python operators on Python scalars follow numpy's rules
        computed = step.operands[:-1] if step.kind in GUARDED else step.operands
        if len(set(computed)) < len(computed) and (step.name in _FALSE_ON_SAME or any(
                np.asarray(pool[index]).dtype.kind in "biu" for index in computed)):
            continue  # README limit: LLVM folds x - x, x != x, x < x... and their float flags
        if step.name in _CONSTANT_ON_INTEGERS and all(
                np.asarray(pool[index]).dtype.kind in "biu" for index in step.operands):
            continue  # README limit: isinf of an integer is known False, and folded
        if step.kind == "setitem" and np.asarray(pool[step.operands[0]]).dtype.byteorder == ">":
            continue  # README: a kernel's copy of a big-endian array is in native byte order
        result = _try(step, pool)
        if result is None:
            continue
        steps.append(step)
        pool.append(result)
    return steps, args


# ------------------------------------------------------------------------------ checking


def _status(step: Step, statuses: Sequence[str], pool: Sequence[Any]) -> str:
    """How exactly numfuse must reproduce a step's value (see the module docstring)."""
    inputs = [statuses[index] for index in step.operands]
    if any(status != EXACT for status in inputs):
        return LOOSE
    operands = [pool[index] for index in step.operands]
    complex_in = any(np.asarray(value).dtype.kind == "c" for value in operands)
    if step.kind == "call" and step.name in SUMMED:
        kinds = np.result_type(*operands).kind if operands else "f"
        return SUM if kinds in "fc" or step.name == "mean" else EXACT
    if step.kind == "astype" and _out_of_range_cast(operands[0], step.extra[0]):
        return LOOSE  # README limit: out-of-range float-to-integer casts may differ
    if _signed_overflow(step, operands):
        return LOOSE  # README limit: numba's signed arithmetic assumes no overflow
    if step.kind == "op" and step.name in ("fmax", "fmin") and _zero_tie(*operands):
        return TIE
    if step.name == "clip" and step.kind in OP_LIKE and len(operands) >= 3 and (
            _zero_tie(operands[0], operands[1]) or _zero_tie(operands[0], operands[2])
            or _zero_tie(operands[1], operands[2])):
        return TIE  # README limit: clip's sign of zero on ties depends on numpy's loop
    name = {"/": "true_divide", "**": "power", "abs": "absolute"}.get(step.name, step.name)
    row = OPS.get(name)
    exactness = row.exactness if row is not None else Exactness.EXACT
    if exactness is Exactness.ULPS or (exactness is Exactness.EXACT_FOR_REAL and complex_in):
        return ULP
    if step.kind in ("op", "scalar", "operator") and complex_in and name in (
            "multiply", "square", "sign", "absolute", "reciprocal", "true_divide"):
        return ULP
    return EXACT


def _zero_tie(a: Any, b: Any) -> bool:
    with np.errstate(all="ignore"):
        a, b = np.asarray(a), np.asarray(b)
        return bool(np.any((a == 0) & (b == 0) & (np.signbit(a.real) != np.signbit(b.real))))


_WRAPPING = frozenset({"add", "subtract", "multiply", "negative", "absolute", "square",
                       "power", "+", "-", "*", "**", "neg", "abs", "sign", "left_shift"})


def _signed_overflow(step: Step, operands: Sequence[Any]) -> bool:
    """Whether a signed integer operation wrapped around (numpy wraps; numba's compiled
    arithmetic treats it as undefined, so later operations may see another value)."""
    if step.kind in OP_LIKE and step.kind != "op":
        step, operands = Step("op", step.name, step.operands), operands[:OPS[step.name].arity]
    if step.name not in _WRAPPING or step.kind not in ("op", "operator", "scalar"):
        return False
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = np.asarray(_renumbered(step, operands))
        except (OverflowError, TypeError, ValueError):
            # numpy refuses these operands as they are (a Python int beyond the dtype
            # of the array beside it); the step itself saw other ones (guarded)
            return False
        if result.dtype.kind != "i":
            return False
        if step.name in ("power", "**"):
            value, left = step.extra[0] if step.kind == "scalar" else (None, True)
            exponent = operands[-1] if left else value
            if np.any(np.abs(np.asarray(exponent, dtype=object)) > 64):
                return True  # exact Python powers this large would never finish
        try:  # the same operation on Python ints: exact
            exact = _renumbered(step, [operand if _is_python_scalar(operand)
                                       else np.asarray(operand).astype(object)
                                       for operand in operands])
        except Exception:
            return True
    return bool(np.any(np.asarray(exact, dtype=object) != result.astype(object)))


def _renumbered(step: Step, operands: Sequence[Any]) -> Any:
    """``step`` applied to ``operands`` themselves (not to the pool)."""
    return apply(Step(step.kind, step.name, tuple(range(len(operands))), step.extra),
                 list(operands))


def _out_of_range_cast(value: Any, target: np.dtype) -> bool:
    source = np.asarray(value)
    if source.dtype.kind not in "fc" or target.kind not in "iu":
        return False
    real = source.real.astype(np.float64)
    info = np.iinfo(target)
    # negatives wrap through the signed type of the same width
    low = float(info.min) if target.kind == "i" else -(2.0 ** (8 * target.itemsize - 1))
    return bool(np.any(~np.isfinite(real) | (real < low) | (real >= float(info.max) + 1)))


def _sum_bound(step: Step, pool: Sequence[Any]) -> Any:
    """A bound on the rounding error of a summed result: ``count * eps`` times the same
    operation on the magnitudes of its operands (``sum(|x|)``, ``|x| @ |y|``...)."""
    operands = [np.asarray(pool[index]) for index in step.operands]
    magnitudes = [np.abs(operand.astype(np.complex128)) for operand in operands]
    with np.errstate(all="ignore"):
        magnitude = np.asarray(apply(Step(step.kind, step.name, tuple(range(len(operands))),
                                          step.extra), magnitudes))
    count = max(1, *(operand.size for operand in operands))
    single = any(operand.dtype in (np.float32, np.complex64) for operand in operands)
    eps = np.finfo(np.float32 if single else np.float64).eps
    return 4 * count * eps * magnitude + 1e-300


def check_program(steps: list[Step], args: list[Any]) -> None:
    fn = make_function(steps, len(args))
    pool: list[Any] = list(args)
    statuses = [EXACT] * len(args)
    bounds: dict[int, Any] = {}
    for step in steps:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pool.append(apply(step, pool))
            statuses.append(_status(step, statuses, pool[:-1]))
            if statuses[-1] == SUM:
                bounds[len(pool) - 1] = _sum_bound(step, pool[:-1])
            elif statuses[-1] == ULP and _is_power(step):
                bounds[len(pool) - 1] = _power_ulps(step, pool[:-1])
    expected, expected_warnings = _run(fn, args)
    actual, actual_warnings = _run(numfuse.jit(fn), args)
    described = "\n  ".join(str(step) for step in steps)
    context = f"program:\n  {described}\nargs: {args!r}"
    if isinstance(expected, BaseException):
        assert type(actual) is type(expected), f"{context}\nnumpy raised {expected!r}, " \
                                               f"numfuse gave {actual!r}"
        return
    if isinstance(actual, FloatingPointError) and str(actual).startswith("underflow") and \
            _subnormal_anywhere(pool):
        return  # README: known difference (see _subnormal_anywhere)
    assert not isinstance(actual, BaseException), f"{context}\nnumfuse raised {actual!r}"
    for position, (got, want) in enumerate(zip(actual, expected, strict=True)):
        status = statuses[len(args) + position]
        where = f"{context}\nresult {position} ({steps[position]}, {status})"
        _compare(got, want, status, bounds.get(len(args) + position), where)
    real_only = all(np.asarray(value).dtype.kind != "c" for value in pool)
    # README: work on static arguments alone (Python bools) is done once, at trace time,
    # without numpy's warnings
    traced = not all(isinstance(value, bool) for value in args)
    if traced and real_only and all(status in (EXACT, ULP, TIE) for status in statuses):
        if any(isinstance(value, np.generic) and value.dtype.kind in "iu" for value in pool):
            # documented limit: numpy's *scalar* integer math warns on overflow, its array
            # loops (which kernels follow) wrap silently
            actual_warnings.discard("overflow")
            expected_warnings.discard("overflow")
        if actual_warnings - expected_warnings == {"underflow"} and _subnormal_anywhere(pool):
            actual_warnings.discard("underflow")  # README: known difference
        assert actual_warnings == expected_warnings, (
            f"{context}\nwarnings: numfuse {sorted(actual_warnings)} != "
            f"numpy {sorted(expected_warnings)}")


def _subnormal_anywhere(values: Sequence[Any]) -> bool:
    """Whether a float value of the program (an argument or a step's result, as numpy
    computed it) is subnormal: the README's known difference, numfuse raising "underflow"
    for results in the subnormal range as the C library does, where numpy's AVX-512 loops
    (tan, arctan, arcsin, sinh, arcsinh, arctanh of subnormal arguments) raise nothing."""
    for value in values:
        array = np.asarray(value)
        if array.dtype.kind == "f":
            tiny = np.finfo(array.dtype).smallest_normal
            if bool(((array != 0) & (np.abs(array) < tiny)).any()):
                return True
    return False


def _run(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Any, set[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
            try:
                result: Any = fn(*args)
            except Exception as error:  # compared by type with numpy's
                result = error
    kinds = {str(warning.message).split(" encountered")[0] for warning in caught
             if warning.category is RuntimeWarning and " encountered" in str(warning.message)}
    return result, kinds


def _compare(got: Any, want: Any, status: str, bound: Any, where: str) -> None:
    assert type(got) is type(want), f"{where}: type {type(got)} != {type(want)}"
    got_array, want_array = np.asarray(got), np.asarray(want)
    assert got_array.dtype == want_array.dtype, \
        f"{where}: dtype {got_array.dtype} != {want_array.dtype}"
    if status == LOOSE:  # a size taken from loose values (x[x > 0]) may differ as well
        assert got_array.ndim == want_array.ndim, \
            f"{where}: dimensions {got_array.ndim} != {want_array.ndim}"
        return
    assert got_array.shape == want_array.shape, \
        f"{where}: shape {got_array.shape} != {want_array.shape}"
    if status == EXACT:
        try:
            assert_same(got, want)
        except AssertionError as error:
            raise AssertionError(f"{where}: {error}") from None
    elif status == ULP:
        _assert_ulp_close(got_array, want_array, where, bound)
    elif status == TIE:
        assert np.array_equal(got_array, want_array, equal_nan=True), \
            f"{where}: {got_array} != {want_array}"
    elif status == SUM:
        _assert_within(got_array, want_array, bound, where)


def _is_power(step: Step) -> bool:
    return step.name in ("power", "**")


def _power_ulps(step: Step, pool: Sequence[Any]) -> Any:
    """The ulps complex ``a ** b`` may differ by: numpy's C library and numfuse both compute
    exp(b log a), whose rounding error grows with |b log a| (README)."""
    operands = [pool[index] for index in step.operands][:2]  # not a guard's condition
    if step.kind == "scalar":
        value, left = step.extra
        operands = [value, operands[0]] if left else [operands[0], value]
    with np.errstate(all="ignore"):
        base, exponent = (np.asarray(value).astype(np.complex128) for value in operands)
        growth = np.abs(exponent * np.log(base))
        return np.clip(np.nan_to_num(4 * growth, nan=0.0), 128, 1e300)  # never inf


def _assert_ulp_close(got: np.ndarray, want: np.ndarray, where: str,
                      ulps: Any = None) -> None:
    if want.dtype.kind not in "fc":
        return  # an integer or bool result of an inexact op (e.g. power): exact already
    scale = np.abs(want)
    finite = np.isfinite(want)
    tolerance = 8 * np.finfo(want.dtype).eps
    if want.dtype.kind == "c":
        tolerance = (128 if ulps is None else ulps) * np.finfo(want.dtype).eps
        finite &= np.isfinite(got)  # complex infinities: libraries disagree on their parts
    with np.errstate(all="ignore"):
        error = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    close = error <= tolerance * scale + np.finfo(want.dtype).tiny
    same_special = (got == want) | (np.isnan(got) & np.isnan(want))
    if want.dtype.kind == "c":
        same_special = np.isnan(got) | ~np.isfinite(got) | same_special
    ok = np.where(finite, close, same_special)
    assert ok.all(), f"{where}: differs beyond a few ulp: {got[~ok][:5]} != {want[~ok][:5]}"


def _assert_within(got: np.ndarray, want: np.ndarray, bound: Any, where: str) -> None:
    if want.dtype.kind not in "fc":
        assert np.array_equal(got, want), f"{where}: {got} != {want}"
        return
    with np.errstate(all="ignore"):
        error = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    finite = np.isfinite(want) & np.isfinite(bound)
    ok = np.where(finite, error <= bound, np.isnan(got) == np.isnan(want))
    assert ok.all(), f"{where}: {got} differs from numpy's {want} beyond {bound}"


# ------------------------------------------------------------------------------ the tests

_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize="NUMFUSE_FUZZ_SEED" not
                     in os.environ and EXAMPLES <= 100,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.filter_too_much])


def _seeded(test: Callable[..., Any]) -> Callable[..., Any]:
    value = os.environ.get("NUMFUSE_FUZZ_SEED")
    return seed(int(value))(test) if value else test


@_seeded
@_SETTINGS
@given(programs())
def test_random_programs_match_numpy(program: tuple[list[Step], list[Any]]) -> None:
    steps, args = program
    check_program(steps, args)
