"""Bad input: one clear exception each, naming the argument or the source line.

Complements test_api.py (signatures, binding) and test_trace.py (concretization and
unsupported operations, each case with its advice): here every message is asserted for
the inputs a caller can get wrong, and the unusual-but-valid inputs (lists, numpy scalars,
read-only, big-endian, zero-size, 0-d and very long arrays) must give numpy's results.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from conftest import assert_same, check

import numfuse


def add(x, y):
    return x + y


X = np.array([1.0, -2.0, 3.5])

# ------------------------------------------------------------------ arguments and keywords


def test_too_few_arguments_name_the_missing_parameter():
    with pytest.raises(TypeError, match="missing a required argument: 'y'"):
        numfuse.jit(add)(X)


def test_too_many_arguments():
    with pytest.raises(TypeError, match=r"add.*too many positional arguments"):
        numfuse.jit(add)(X, 1.0, 2.0)


def test_unknown_keyword_is_named():
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        numfuse.jit(add)(X, 1.0, z=2.0)


# ------------------------------------------------------------------ dtypes

# (object arrays are not among them: numpy runs the function, see test_api)
UNSUPPORTED = [
    pytest.param(np.array(["ab", "c"]), "<U2", id="str"),
    pytest.param(np.array([b"ab", b"c"]), "|S2", id="bytes"),
    pytest.param(np.array(["2024-01-01"], dtype="datetime64[D]"), "datetime64[D]",
                 id="datetime64"),
    pytest.param(np.array([3], dtype="timedelta64[s]"), "timedelta64[s]", id="timedelta64"),
    pytest.param(np.zeros(2, dtype=[("a", "f8"), ("b", "i4")]), "('a', '<f8')", id="structured"),
]


@pytest.mark.parametrize(("value", "dtype_text"), UNSUPPORTED)
def test_unsupported_dtype_names_the_argument_and_dtype(value, dtype_text):
    with pytest.raises(numfuse.UnsupportedDtypeError) as excinfo:
        numfuse.compile(add, X[:2], value)
    assert isinstance(excinfo.value, TypeError)
    message = str(excinfo.value)
    assert "argument 1 ('y') has dtype" in message
    assert dtype_text in message
    assert "Convert it first" in message


def _numpys_error(fn, *args):
    with pytest.raises(Exception) as expected:
        fn(*args)
    return expected.value


@pytest.mark.parametrize(("value", "dtype_text"), UNSUPPORTED)
def test_an_argument_of_a_dtype_numfuse_cannot_compile_makes_numpy_run_the_function(
        value, dtype_text):
    """Found by a conformance hunt: a function given dates or strings raised numfuse's
    error where numpy computes (``t + np.timedelta64(1, "D")``).  ``jit`` runs numpy's
    function as written, warning once; ``numfuse.compile`` raises (above)."""
    jitted = numfuse.jit(lambda x, y: (x * 2, y[::-1]))
    with pytest.warns(RuntimeWarning, match="cannot compile"):
        got = jitted(X[:2], value)
    assert_same(got[0], X[:2] * 2)
    assert got[1].dtype == value.dtype and got[1].tobytes() == value[::-1].tobytes()
    error = _numpys_error(add, X[:2], value)  # numpy's own error, as numpy raises it
    with pytest.raises(type(error), match=re.escape(str(error))):
        numfuse.jit(add)(X[:2], value)  # (and no fallback warning: numpy raised)


def test_dates_computed_in_the_function_run_with_numpy():
    days = np.array(["2024-01-01", "2024-03-01"], dtype="datetime64[D]")
    shift = numfuse.jit(lambda t: (t + np.timedelta64(1, "D"), np.diff(t)))
    with pytest.warns(RuntimeWarning):
        got = shift(days)
    assert_same(got[0], days + np.timedelta64(1, "D"))
    assert_same(got[1], np.diff(days))
    from_numbers = numfuse.jit(lambda n: n + np.datetime64("2020-01-01"))
    with pytest.warns(RuntimeWarning, match="cannot compile"):
        assert_same(from_numbers(np.arange(2)), np.arange(2) + np.datetime64("2020-01-01"))
    with pytest.raises(numfuse.UnsupportedDtypeError, match="datetime64"):
        numfuse.compile(lambda n: n + np.datetime64("2020-01-01"), np.arange(2))


def test_unsupported_dtype_of_a_closed_over_constant():
    labels = np.array(["a", "b"])
    with pytest.raises(TypeError, match="<U1"):
        numfuse.compile(lambda x: x + labels, X[:2])
    error = _numpys_error(lambda x: x + labels, X[:2])
    with pytest.raises(type(error)):  # numpy's own error (without the warning)
        numfuse.jit(lambda x: x + labels)(X[:2])


def test_non_numeric_python_argument():
    # a set is not data: a static value, with which numpy raises its own TypeError
    with pytest.raises(TypeError, match="unsupported operand"):
        numfuse.jit(add)(X, {1.0})
    # a string is a setting (a static value): used as a number, numpy's own error
    error = _numpys_error(add, X, "1.0")
    with pytest.raises(type(error)):
        numfuse.jit(add)(X, "1.0")
    with pytest.raises(TypeError, match="dtype <U3"):
        numfuse.compile(add, X, "1.0")


# ------------------------------------------------------------------ shapes


def test_shapes_that_do_not_broadcast_raise_numpys_message():
    a, b = np.ones((2, 3)), np.ones(4)
    with pytest.raises(ValueError) as numpy_error:
        add(a, b)
    with pytest.raises(ValueError) as excinfo:
        numfuse.jit(add)(a, b)
    assert str(excinfo.value).strip() == str(numpy_error.value).strip()
    assert "(2,3) (4,)" in str(excinfo.value)


def _scaled_sum(a, b, c):
    return (a + b) * c


def _log_then_add(a, b):
    return np.log(a) + b * b.sum()


@pytest.mark.parametrize(("fn", "args"), [
    (_scaled_sum, (np.ones(3), np.ones(3), np.ones(4))),
    (_scaled_sum, (np.ones((2, 3)), np.ones((1, 3)), np.ones((3, 2)))),
    (_log_then_add, (-np.ones(3), np.ones(2))),
], ids=["three-operands", "2-d", "after-a-warning"])
def test_a_kernels_broadcast_error_is_numpys_for_the_failing_operation(fn, args):
    """One kernel reads every operand, but numpy fails at one operation: its operands'
    shapes are the message (on every call: the first, one through a kept plan)."""
    with pytest.raises(ValueError) as numpy_error, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(*args)
    jitted = numfuse.jit(fn)
    for _ in range(3):
        with pytest.raises(ValueError) as excinfo, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jitted(*args)
        assert str(excinfo.value) == str(numpy_error.value)


def test_broadcast_mismatch_on_a_later_call_of_a_compiled_signature():
    jitted = numfuse.jit(add)
    jitted(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError, match=r"could not be broadcast together with shapes "
                                         r"\(2,3\) \(4,\)"):
        jitted(np.ones((2, 3)), np.ones(4))


# ------------------------------------------------------------------ conversions and layouts


@pytest.mark.parametrize("args", [
    pytest.param((np.array([1, 2, 3]), (1.5, 2, 3)), id="array-and-tuple"),
    pytest.param((np.array([[1], [2]]), [True, False]), id="nested-list-broadcasts"),
    pytest.param((np.float32(2), np.int8(3)), id="numpy-scalars"),
    pytest.param((np.float32(2), 3), id="numpy-scalar-and-python-int"),
    pytest.param((np.uint8(200), np.array([100], np.uint8)), id="uint8-wraps"),
])
def test_lists_tuples_and_numpy_scalars_convert_as_numpy(args):
    check(add, *args)


@pytest.mark.parametrize("args", [
    pytest.param(([1, 2, 3], (1.5, 2, 3)), id="list-and-tuple"),
    pytest.param(([[1], [2]], [True, False]), id="nested-lists"),
    pytest.param(([1, 2.5], [3]), id="mixed-lists"),
    pytest.param(((1, 2.5), (3.0,)), id="mixed-tuples"),
])
def test_two_lists_or_tuples_add_as_pythons(args):
    """``+`` of two lists joins them (a list and a tuple raise TypeError), whatever the
    numbers they hold: numpy runs the function."""
    try:
        expected = add(*args)
    except TypeError as error:
        with warnings.catch_warnings():
            warnings.simplefilter("always", numfuse.NumpyFallbackWarning)
            with pytest.raises(TypeError, match=re.escape(str(error))):
                numfuse.jit(add)(*args)
        return
    with pytest.warns(numfuse.NumpyFallbackWarning, match="list or tuple"):
        assert numfuse.jit(add)(*args) == expected


def test_read_only_arguments():
    x = X.copy()
    x.flags.writeable = False
    check(lambda x: (x * 2, x), x)


@pytest.mark.parametrize("dtype", [">f8", ">i4", ">c16", ">u2"])
def test_big_endian_arguments_give_numpys_result_dtype(dtype):
    x = np.arange(5).astype(dtype)
    check(lambda x: (x + x, -x, x * 1.5, x < 2), x)
    returned = numfuse.jit(lambda x: x)(x)
    assert returned is x and returned.dtype == np.dtype(dtype)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 1)])
def test_zero_size_arrays(shape):
    check(lambda x, y: (x * y + 1.0, np.exp(x) > y), np.ones(shape), np.ones(shape[-1:]))


def test_zero_d_arrays_and_numpy_scalars():
    check(lambda x, y: (x + y, x * 2, np.where(x > y, x, y)), np.array(1.5), np.array(2))
    check(lambda x, y: (x + y, x * 2), np.float32(1.5), np.int16(2))


@pytest.mark.xfail(strict=True, reason="README limit: a numpy call on a 0-d elementwise "
                   "result sees a 0-d array where numpy has a numpy scalar")
def test_numpy_call_on_a_0d_result_returns_numpys_type():
    check(lambda x: np.abs(x).T, np.array(0.0))


def test_the_kernel_loop_index_is_64_bit():
    """More than 2**31 elements: the loop bound is ``out.shape[0]``, an ``intp``.

    Checked by reasoning on the generated source and the optimised IR instead of running
    on 2**31 elements (the output alone would be 8 GiB)."""
    from numfuse import backend

    huge = np.broadcast_to(np.float32(1.5), (2**31 + 5,))
    compiled = numfuse.compile(lambda x: x * 2, huge[:4])
    kernel = compiled.kernels[0]
    assert "for i in range(n):" in kernel.source and "n = in0.shape[0]" in kernel.source
    assert np.dtype(np.intp).itemsize == 8
    ir = backend.llvm_ir(kernel.compiled)
    assert "trunc i64" not in ir  # no narrowing of the index or of the shape


# ------------------------------------------------------------------ traced code


def branches(x):
    if x > 0:  # marker
        return x
    return -x


def unsupported(x):
    return np.shares_memory(x, x)  # marker


def adds_in_place(x):
    x += 1  # marker
    return x


def writes_out(x):
    return np.add(x, 1, out=x)  # marker


@pytest.mark.parametrize(("fn", "error", "words"), [
    pytest.param(branches, numfuse.ConcretizationError,
                 ["bool() of a traced value", "if x > 0", "np.where"], id="control-flow"),
    pytest.param(unsupported, numfuse.UnsupportedOperationError,
                 ["np.shares_memory is not supported", "return np.shares_memory(x, x)",
                  "no memory to compare", "outside the jitted function"],
                 id="unsupported-function"),
    pytest.param(adds_in_place, numfuse.UnsupportedOperationError,
                 ["in-place += on an argument", "x += 1", "write `x = x + 1`"],
                 id="in-place-operator"),
    pytest.param(writes_out, numfuse.UnsupportedOperationError,
                 ["in-place np.add(..., out=x)", "out=x", "never writes into its arguments"],
                 id="out"),
])
def test_traced_code_errors_name_the_line_and_the_fix(fn, error, words):
    x = X.copy()
    with pytest.raises(error) as excinfo:
        numfuse.jit(fn)(x)
    message = str(excinfo.value)
    assert "test_errors.py:" in message
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert_same(x, X)  # the caller's array was not written


# ------------------------------------------------------------------ Compiled signatures


def test_compiled_called_with_another_dtype_names_argument_and_dtypes():
    compiled = numfuse.compile(add, X, 1.0)
    with pytest.raises(numfuse.SignatureMismatchError) as excinfo:
        compiled(X.astype(np.float32), 1.0)
    assert str(excinfo.value) == (
        "argument 0 ('x') of add is a 1-d array float32[n], but this Compiled was made for a "
        "1-d array float64[n]; the dtype differs (float64 vs float32). Call numfuse.compile "
        "with the new arguments, or use numfuse.jit to compile per signature.")


def test_compiled_called_with_keywords_is_a_type_error():
    compiled = numfuse.compile(add, X, 1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'y'"):
        compiled(X, y=1.0)


def test_out_of_range_python_int_names_the_value_and_dtype():
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        numfuse.jit(add)(np.ones(3, np.uint8), 300)


def test_python_int_beyond_64_bits_raises_numpys_error():
    """numpy runs the function (the value is beyond any kernel dtype): its own error."""
    with pytest.raises(OverflowError) as expected:
        add(np.ones(3, np.uint64), 2**64)
    with pytest.raises(OverflowError, match=str(expected.value)):  # (no fallback warning)
        numfuse.jit(add)(np.ones(3, np.uint64), 2**64)


# ------------------------------------------------------------------ naming the parameter


def test_every_argument_message_names_the_parameter_too():
    def scaled(values, scale):
        return values * scale

    for call in (lambda: numfuse.compile(scaled, X, np.array(["a"])),
                 lambda: numfuse.compile(scaled, X, 1.0)(X, np.array(["a"]))):
        with pytest.raises(numfuse.UnsupportedDtypeError,
                           match=r"^argument 1 \('scale'\) has dtype <U1"):
            call()
    compiled = numfuse.compile(scaled, X, 1.0)
    with pytest.raises(numfuse.SignatureMismatchError,
                       match=r"^argument 0 \('values'\) of .*scaled is a 2-d array"):
        compiled(np.ones((2, 2)), 1.0)
    static = numfuse.compile(numfuse.jit(scaled, static_argnums=(1,)), X, 2)
    with pytest.raises(numfuse.SignatureMismatchError,
                       match=r"^static argument 1 \('scale'\) of .*scaled was 2"):
        static(X, 3)
    with pytest.raises(numfuse.UnsupportedDtypeError, match=r"argument 2 \('xs\[1\]'\)"):
        numfuse.compile(lambda first, *xs: first + xs[0] + xs[1], X, X, np.array(["a"]))


# ------------------------------------------------------------------ math functions

import math  # noqa: E402
from math import sqrt  # noqa: E402


@pytest.mark.parametrize(("fn", "numpy_name"), [
    pytest.param(lambda x: math.exp(x) + 1.0, "exp", id="math.exp"),
    pytest.param(lambda x: sqrt(x), "sqrt", id="from-math-import"),
    pytest.param(lambda x: 2.0 * math.log(
        x.sum()), "log", id="multi-line-call"),
    pytest.param(lambda x: math.floor(x), "floor", id="math.floor"),
    pytest.param(lambda x: math.atan2(x, 1.0), "atan2", id="math.atan2"),
])
def test_math_function_on_a_traced_value_advises_its_numpy_namesake(fn, numpy_name):
    with pytest.raises(numfuse.ConcretizationError) as excinfo:
        numfuse.jit(fn)(X)
    message = str(excinfo.value)
    assert f"math.{numpy_name}() computes on Python numbers" in message
    assert f"Use np.{numpy_name}(...) instead" in message
    assert "np.where" not in message


def test_math_function_numpy_lacks_or_means_otherwise_gets_no_numpy_advice():
    for fn, name in ((lambda x: math.erf(x), "erf"),
                     (lambda x: math.remainder(x, 2.0), "remainder")):
        with pytest.raises(numfuse.ConcretizationError) as excinfo:
            numfuse.jit(fn)(X)
        message = str(excinfo.value)
        assert f"numpy has no {name}() that matches it" in message
        assert "Use np." not in message


def test_float_next_to_a_finished_math_call_keeps_the_general_advice():
    with pytest.raises(numfuse.ConcretizationError) as excinfo:
        numfuse.jit(lambda x: math.exp(2.0) * float(x))(X)
    message = str(excinfo.value)
    assert "math.exp" not in message.split("\n", 1)[1] and "np.where" in message


def test_math_of_a_scalar_argument_still_compiles_as_a_static_value():
    jitted = numfuse.jit(lambda x, mu: x * math.exp(mu))
    assert_same(jitted(X, 0.5), X * math.exp(0.5))


def test_a_numpy_scalar_type_called_on_a_traced_value_advises_astype():
    with pytest.raises(numfuse.ConcretizationError, match=r"x\.sum\(\)\.astype\(np\.float32\)"):
        numfuse.jit(lambda x: np.float32(x.sum()) * 2)(X)


def test_a_numpy_arrays_method_given_a_traced_value_advises_the_function():
    table, w = np.arange(15.0).reshape(3, 5), np.linspace(-1.0, 1.0, 5)
    with pytest.raises(numfuse.ConcretizationError, match=r"np\.dot\(X, w\) or X @ w"):
        numfuse.grad(lambda w: np.sum(table.dot(w) ** 2))(w)  # ndarray.dot converts w
    np.testing.assert_allclose(numfuse.grad(lambda w: np.sum(np.dot(table, w) ** 2))(w),
                               2 * table.T @ (table @ w), rtol=1e-12)


def _reports_its_loss(x):
    loss = (x**2).mean()
    print("loss", loss)
    return f"loss={loss:.3f}", repr(x * 2), x - loss


def test_printing_or_formatting_a_value_runs_with_numpy_at_every_call(capsys):
    """The text of a value needs it: numpy runs such a function, so each call prints (a
    traced value's type had been printed once, and returned as text)."""
    jitted = numfuse.jit(_reports_its_loss)
    with pytest.warns(numfuse.NumpyFallbackWarning, match=r"str\(\) of a traced value"):
        first = jitted(X)
    assert_same(first, _reports_its_loss(X))
    capsys.readouterr()
    assert_same(jitted(X), _reports_its_loss(X))
    assert capsys.readouterr().out.count("loss 5.75") == 2  # each run printed its value
    with pytest.raises(numfuse.ConcretizationError, match="print or format it outside"):
        numfuse.compile(_reports_its_loss, X)
    labelled = numfuse.jit(lambda x, s: (x * s, f"scale={s}"))  # a number argument: static
    assert_same(labelled(X, 2.5), (X * 2.5, "scale=2.5"))
    assert_same(labelled(X, 3.5), (X * 3.5, "scale=3.5"))


def test_in_place_on_a_view_of_the_functions_own_array_advises_writing_through_it():
    def shifted(x):
        y = x * 2
        head, tail = y[:1], y[1:]
        tail += 1
        return y, head

    with pytest.raises(numfuse.UnsupportedOperationError,
                       match=r"(?s)view of an array the function made.*y\[1:\] \+= w"):
        numfuse.jit(shifted)(X)


def test_item_assignment_while_a_named_view_is_alive_says_why():
    def shifted(x):
        y = x * 2
        head = y[:-1]
        y[1:] = head
        return y, head

    with pytest.raises(numfuse.UnsupportedOperationError,
                       match=r"(?s)view of it held in a variable.*`del v`"):
        numfuse.jit(shifted)(X)


def test_numpys_own_error_comes_through_the_fallback_filter():
    """Found by a conformance hunt: with ``NumpyFallbackWarning`` made an error (as these
    tests run), ``x.sum() @ x.max()`` raised the error tracing met on its stand-in values
    (a ValueError of matmul on 0-d arrays) instead of numpy's TypeError."""
    fn = numfuse.jit(lambda x: x.sum() @ x.max())
    with pytest.raises(TypeError, match="unsupported operand"):
        fn(X)
