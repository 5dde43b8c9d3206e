"""Lowering: kernels as LLVM IR.  Rows whose length is not a whole number of granules,
strided and broadcast operands, fused reductions across the buffered tail, the typing
rules of the kernel language, and the generated Python source computing what the
compiled kernel computes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_like_numpy, assert_same

import numfuse
from numfuse.inspection import kernel_vector_report
from numfuse.lowering import GRANULE, lower
from numfuse.lowering import types as T
from numfuse.lowering.scalars import HELPERS, LoweringError

LENGTHS = [0, 1, GRANULE - 1, GRANULE, GRANULE + 1, 3 * GRANULE + 5, 1000]


def _softplus(x, y):
    e = np.exp(-np.abs(x - y))
    return np.log1p(e) + np.maximum(x - y, 0.0), e * y


@pytest.mark.parametrize("length", LENGTHS)
def test_every_length_and_layout_gives_numpys_values(length):
    rng = np.random.default_rng(length)
    wide = rng.standard_normal((2, 3 * length + 1))
    kernel = numfuse.compile(_softplus, wide[0, :length], wide[1, :length]).kernels[0]
    expected = _softplus(wide[0, :length], wide[1, :length])
    for x, y in [(wide[0, :length], wide[1, :length]),                 # contiguous
                 (wide[0, ::3][:length], wide[1, 1::3][:length]),       # strided
                 (wide[0, :length][::-1], wide[1, :length][::-1])]:     # reversed
        assert_same(kernel.gufunc(x, y), _softplus(x, y), rtol=1e-15)
    out = np.zeros((2, 2 * length + 1))
    kernel.gufunc(wide[0, :length], wide[1, :length], out=(out[0, ::2][:length],
                                                           out[1, 1::2][:length]))
    assert_same((out[0, ::2][:length], out[1, 1::2][:length]), expected, rtol=1e-15)
    assert not out[0, 1::2].any()                                     # nothing else written


@pytest.mark.parametrize("length", LENGTHS)
def test_fused_reductions_skip_the_padding_of_the_last_granule(length):
    x = np.arange(1.0, length + 1.0)
    integers = np.arange(length) % 7 - 3

    def reductions(x, i):
        return (np.sum(x * 0.5), np.prod(x / (x + 1.0)), np.max(-x), np.min(i * 3),
                np.sum(i), np.any(i > 2), np.all(x > 0))

    if length == 0:                      # max/min of nothing: numpy raises, so does numfuse
        with pytest.raises(ValueError, match="zero-size array"):
            reductions(x, integers)
        with pytest.raises(ValueError, match="zero-size array"):
            numfuse.jit(reductions)(x, integers)
        return
    compiled = numfuse.compile(reductions, x, integers)
    assert len(compiled.kernels) <= 2
    assert_same(compiled(x, integers), reductions(x, integers), rtol=1e-14)


def test_fused_reductions_fold_the_buffered_tail_in_a_loop_of_its_own():
    """The row function's vectorised loop folds every element it computes (no test of
    each one against the row's end); a row's last partial granule goes through the tail
    row function, which computes only the valid elements of the buffers."""
    x = np.linspace(-1.0, 1.0, 3 * GRANULE + 5)
    compiled = numfuse.compile(lambda x: (np.sum(x * x), x + 1.0), x)
    (kernel,) = compiled.kernels
    functions = _defined_functions(kernel.llvm_ir())
    assert {".row", ".tail"} <= set(functions)
    vector_body = functions[".row"].split("vector.body:")[1].split("middle.block:")[0]
    assert " select " not in vector_body
    assert_same(compiled(x), (np.sum(x * x), x + 1.0), rtol=1e-14)
    plain = numfuse.compile(lambda x: x * 2.0, x)  # no fused reduction: one row function
    assert ".tail" not in _defined_functions(plain.kernels[0].llvm_ir())


def _defined_functions(ir_text: str) -> dict[str, str]:
    """The bodies of a kernel's functions by the suffix of their names (``.row``...)."""
    bodies = {}
    for part in ir_text.split("\ndefine ")[1:]:
        name = part.split("@", 1)[1].split("(", 1)[0]
        bodies[name[name.rfind("."):] if "." in name else name] = part.split("\n}\n")[0]
    return bodies


def test_rows_of_a_broadcast_kernel_each_end_in_a_partial_granule():
    rows = np.linspace(0.0, 1.0, 7)[:, None]
    columns = np.linspace(-2.0, 2.0, 2 * GRANULE + 3)[None, :]

    def fn(a, b):
        d = a - b
        k = np.exp(-d * d / 2)
        return k, -d * k, np.sum(k, axis=1)

    assert_same(numfuse.jit(fn)(rows, columns), fn(rows, columns), rtol=1e-14)


def test_the_repeated_last_element_raises_no_flag_the_row_does_not():
    def fn(x):
        return np.log(x), 1.0 / x

    for length in (1, 3, GRANULE + 2):
        x = np.linspace(1.0, 2.0, length)
        with np.errstate(all="raise"):
            assert_same(numfuse.jit(fn)(x), fn(x), rtol=1e-15)
        x[length // 2] = 0.0                 # one zero: numpy's warnings, once
        with pytest.warns(RuntimeWarning, match="divide by zero"):
            numfuse.jit(fn)(x)


def test_a_complex_operand_at_an_offset_of_half_its_size_is_read_correctly():
    parts = np.arange(2.0 * 41 + 2)
    z = np.ndarray((40,), complex, parts, offset=8, strides=(16,))  # misaligned by a part
    kernel = numfuse.compile(lambda z: z * (1 + 2j), np.ones(40, complex)).kernels[0]
    assert_same(kernel.gufunc(z), z * (1 + 2j))


# ------------------------------------------------------------------ the generated source


FUNCTIONS = [
    lambda x, y: ((x - y) ** 2 / 2, -(x - y)),
    lambda x, y: (np.maximum(x, y), np.where(x > y, x, y * 2), np.sign(x - y)),
    lambda x, y: (np.exp(x) + np.log1p(np.abs(y)), np.tanh(x * y)),
    lambda x, y: (x // 3, x % 3, x ** 2 + y),
    lambda x, y: (np.sum(x * y), np.max(x - y)),
]


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int8])
def test_the_source_run_as_python_computes_what_the_kernel_computes(fn, dtype):
    """A kernel's ``source`` is plain Python over numpy scalars (kernel_lib's helpers are
    plain Python too): it must agree with the compiled kernel, element for element."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(GRANULE + 3) * 10).astype(dtype)
    y = (rng.standard_normal(GRANULE + 3) * 10).astype(dtype) + dtype(1)
    compiled = numfuse.compile(fn, x, y)
    for kernel in compiled.kernels:
        operands = [x if node is compiled.graph.inputs[0] else y if node is
                    compiled.graph.inputs[1] else None for node in kernel.region.inputs]
        if any(operand is None for operand in operands):
            continue  # a kernel reading another kernel's result
        generated = kernel.generated
        outputs = [np.zeros(len(x) if operand.core else 1, operand.dtype)
                   for operand in generated.program.outputs]
        namespace: dict = {}
        exec(compile(generated.source, kernel.name, "exec"), namespace)
        arguments = [operand if core else operand[0] for operand, core in
                     zip(operands, generated.core_inputs, strict=True)]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            namespace["kernel"](*arguments, *outputs)
            compiled_outputs = kernel.gufunc(*arguments)
        if not isinstance(compiled_outputs, tuple):
            compiled_outputs = (compiled_outputs,)
        for python, machine, core in zip(outputs, compiled_outputs,
                                         generated.core_outputs, strict=True):
            machine = np.asarray(machine).reshape(python.shape)
            if not core and machine.dtype.kind in "fc":   # sums in another order
                np.testing.assert_allclose(machine, python, rtol=1e-5)
                continue
            assert_same(machine, python, rtol=2e-6 if dtype == np.float32 else 1e-15)


# ------------------------------------------------------------------ typing rules


def test_integer_arithmetic_widens_like_numba():
    assert T.arithmetic(np.dtype("int8"), np.dtype("int8")) == T.INT64
    assert T.arithmetic(np.dtype("uint8"), np.dtype("uint32")) == T.UINT64
    assert T.arithmetic(np.dtype("int64"), np.dtype("uint64")) == T.INT64
    assert T.arithmetic(T.BOOL, T.BOOL) == T.INT64
    assert T.bitwise(T.BOOL, T.BOOL) == T.BOOL


def test_floats_widen_like_numba():
    float32 = np.dtype("float32")
    assert T.arithmetic(float32, float32) == float32
    assert T.arithmetic(float32, np.dtype("int16")) == float32
    assert T.arithmetic(float32, T.INT64) == T.FLOAT64      # a Python int literal
    assert T.arithmetic(np.dtype("complex64"), T.FLOAT64) == T.COMPLEX128


def test_a_signed_integer_and_a_uint64_compare_as_floats():
    assert T.comparison(T.INT64, T.UINT64) == T.FLOAT64
    assert T.comparison(np.dtype("int32"), np.dtype("uint32")) == T.INT64


def test_literals_type_as_in_numba():
    assert T.literal_dtype(3) == T.INT64 and T.literal_dtype(2**63) == T.UINT64
    assert T.literal_dtype(True) == T.BOOL and T.literal_dtype(0.5) == T.FLOAT64
    assert T.constant(np.dtype("uint8"), -1).constant == -1   # 255, as LLVM reads it


def test_a_helper_is_compiled_per_dtypes_with_the_result_numba_would_give():
    float32, float64 = np.dtype("float32"), np.dtype("float64")
    assert HELPERS.helper("less_float", (float32, float32, float32), ()).result == T.BOOL
    # sign_float returns its argument or Python floats: numba unifies them to float64
    assert HELPERS.helper("sign_float", (float32,), ()).result == float64
    quotient = HELPERS.helper("divmod_float", (float64, float64, float64), ())
    assert quotient.result == (float64, float64)
    # every step in float32 for float32 operands (numpy's float32 npy_divmod)
    assert HELPERS.helper("divmod_float", (float32, float32, float32), ()).result == \
        (float32, float32)
    assert "alwaysinline" in quotient.text


def test_the_language_refuses_what_it_cannot_compile():
    from llvmlite import ir

    from numfuse.lowering.scalars import Emitter

    module = ir.Module()
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "f")
    emitter = Emitter(ir.IRBuilder(function.append_basic_block()), (), HELPERS)
    with pytest.raises(LoweringError, match="chained comparison"):
        emitter.expression("1 < 2 < 3")
    with pytest.raises(LoweringError, match="unknown function"):
        emitter.expression("open(1)")


def test_lowering_is_pure():
    kernel = numfuse.compile(_softplus, np.ones(4), np.ones(4)).kernels[0]
    assert lower(kernel.generated) == lower(kernel.generated)


# ------------------------------------------------------------------ kernels of passes


def test_blocks_of_columns_are_as_wide_as_the_column_arrays_allow_and_even():
    from numfuse.lowering.loops import (
        MAX_COLUMNS,
        MIN_COLUMNS,
        SCRATCH_BYTES,
        column_block,
        widest_block,
    )

    assert widest_block(8) == MAX_COLUMNS and widest_block(10**6) == MIN_COLUMNS
    widest = widest_block(20 * 16)
    assert widest * 20 * 16 <= SCRATCH_BYTES and widest % GRANULE == 0
    assert column_block(1000, 4096) == 1008  # one block of whole rows
    assert column_block(10_000, 4096) == 3344  # three even blocks
    assert column_block(0, 4096) == GRANULE and column_block(5, 256) == GRANULE
    for columns in (1, 17, 4097, 100_000):
        width = column_block(columns, 4096)
        assert width <= 4096 and width % GRANULE == 0
        assert -(-columns // width) == -(-columns // 4096)  # no more blocks than needed


@pytest.mark.parametrize("shape", [(5, 3), (3, GRANULE + 5), (40, 1100)])
def test_the_source_of_a_kernel_of_passes_run_as_python_computes_what_it_computes(shape):
    def fn(x, row_weights, shift):
        d = (x - shift) * row_weights
        return d - d.mean(axis=0), d.std(axis=0, ddof=1), (d * d).max(axis=0, keepdims=True)

    rng = np.random.default_rng(2)
    x, weights, shift = rng.standard_normal(shape), rng.random((shape[0], 1)), 0.25
    kernel = numfuse.compile(fn, x, weights, shift).kernels[0]
    assert kernel.layout == "(m,n),(),(m)->(m,n),(n),(n)"
    operands = [x, shift, weights[:, 0]]
    outputs = [np.zeros(shape), np.zeros(shape[1]), np.zeros(shape[1])]
    namespace: dict = {}
    exec(compile(kernel.generated.source, kernel.name, "exec"), namespace)
    namespace["kernel"](*operands, *outputs)
    assert_same(tuple(kernel.gufunc(*operands)), tuple(outputs))
    assert_same(tuple(outputs), (fn(x, weights, shift)[0], fn(x, weights, shift)[1],
                                 fn(x, weights, shift)[2][0]))


@pytest.mark.parametrize("source", [np.float64, np.float32])
@pytest.mark.parametrize("size", [1, 3, 17])
def test_float_to_uint64_casts_like_numpy_in_and_out_of_range(source, size):
    # In range (negatives wrap through int64) exactly and silently; beyond it (2**64 and
    # up, below -2**63, infinities, NaN) numpy's "indefinite" integers and "invalid value",
    # raised only by the lanes that hold such a number.
    values = [1.8446744073709552e19, 2e19, 1e30, np.inf, -np.inf, np.nan, -9.3e18, -1e19,
              9.3e18, 2.0**63, 1.2e19, 1.8446744073709550e19, -1.0, -0.5, 0.9, 1e10, -1e10]
    for value in values:
        with np.errstate(all="ignore"):
            x = np.full(size, value, dtype=source)
        x[::2] = 7.0
        assert_like_numpy(lambda v: v.astype(np.uint64), x)


def _guarded_scalar_work(x, k):
    return np.where(x > 0, np.arccos(k), 0)


def _scalar_work_in_a_reduction(x, k):
    return np.sum(x * np.log(k - 5.0)) + x.max(initial=0)


@pytest.mark.parametrize("fn", [_guarded_scalar_work, _scalar_work_in_a_reduction])
@pytest.mark.parametrize("shape", [(0,), (2,), (0, 3), (2, 0)])
@pytest.mark.parametrize("k", [np.int64(-2**63), 5.0, 7.0])
def test_scalar_work_before_the_loop_raises_its_flags_for_no_element_too(fn, shape, k):
    # numpy computes arccos(k) once per call, however many elements x has; the kernel
    # computes it before its loop, which must run (and keep it) for an empty row too.
    assert_like_numpy(fn, np.ones(shape), k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rare_library_calls_are_inlined_into_the_vector_loop(dtype):
    # The vectoriser calls a masked variant of the C library's sin for lanes beyond the
    # vector reduction; inlined afterwards, its test of the mask stays in the loop and the
    # call sits in a branch ordinary iterations never take (an out-of-line call cost
    # every iteration its vector registers).  Lanes it leaves out are zeros: rounded to
    # float32 they raise nothing.
    x = np.concatenate([np.linspace(-50.0, 50.0, 37), [1e7, -3e9, 1e300 if dtype is
                                                       np.float64 else 3e38]]).astype(dtype)
    compiled = numfuse.compile(lambda x: np.sin(x), x)
    (kernel,) = compiled.kernels
    ir = kernel.llvm_ir()
    assert "call" in ir and "@_ZGV_LLVM_M" not in "".join(
        line for line in ir.splitlines() if " call " in line)
    assert kernel_vector_report(kernel).vectorised
    assert_like_numpy(lambda x: np.sin(x), x, rtol=2 * np.finfo(dtype).eps)
    with np.errstate(all="raise"):
        compiled(np.full(40, 1.0, dtype))  # no "underflow" from the lanes left out


@pytest.mark.parametrize(("fn", "dtype", "interleaved"), [
    (lambda x: np.exp(-x) / (1.0 + np.log1p(x)), np.float64, True),
    (lambda x: np.where(x > 1.0, np.exp(-x), x), np.float64, True),  # booleans, 8-byte values
    # 16 float32 lanes: two vectors would overshoot a granule
    (lambda x: np.exp(-x) / (1.0 + np.log1p(x)), np.float32, False),
    (lambda x: np.sum(np.exp(-x)), np.float64, False),  # a fold's order is fixed
])
def test_float64_loops_without_folds_interleave_two_vector_iterations(fn, dtype, interleaved):
    # Chains of transcendental functions outrun the core's reorder window: two iterations
    # in flight overlap their chains (LLVM chose one for such loops).
    x = np.linspace(0.0, 4.0, 67).astype(dtype)
    kernel = numfuse.compile(fn, x).kernels[0]
    assert ("llvm.loop.interleave.count" in lower(kernel.generated).modules[0]) == interleaved
    assert kernel_vector_report(kernel).vectorised
    assert_like_numpy(fn, x, rtol=4 * np.finfo(dtype).eps)
