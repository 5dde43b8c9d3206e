"""numfuse on dask arrays: lazy results equal to numpy's, kernels as gufuncs in dask and
xarray, pickling, and a run on dask.distributed worker processes."""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same

import numfuse
from numfuse.errors import SignatureMismatchError, UnsupportedOperationError
from numfuse.runtime import Program

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


def logp_and_grad(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


def sum_of_squares(x, mu):
    return np.sum((x - mu) ** 2)


def centred(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def computed(result):
    """The numpy value of every leaf of a (tuple of) dask result(s)."""
    return dask.compute(result)[0]


def assert_lazy(result):
    leaves = result if isinstance(result, tuple) else (result,)
    for leaf in leaves:
        assert isinstance(leaf, da.Array), f"{type(leaf).__name__} is not a dask array"


@pytest.fixture
def x2d():
    return np.random.default_rng(0).standard_normal((203, 37))


def test_elementwise_multi_output_is_lazy_and_equals_numpy(x2d):
    jitted = numfuse.jit(logp_and_grad)
    chunked = da.from_array(x2d, chunks=(50, 10))
    result = jitted(chunked, 0.25)
    assert_lazy(result)
    assert result[0].chunks == chunked.chunks
    assert_same(computed(result), logp_and_grad(x2d, 0.25))


def test_dask_and_numpy_arguments_share_one_compilation(x2d):
    jitted = numfuse.jit(logp_and_grad)
    jitted(x2d, 0.25)
    jitted(da.from_array(x2d, chunks=40), 0.25)
    assert len(jitted.compiled) == 1


def scaled(x, scale):
    return x * scale + 1, -x, x > scale


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8, np.complex64])
@pytest.mark.parametrize("scale", [3, 2.5, np.float64(0.5)])
def test_dtypes_follow_numpy_promotion(dtype, scale):
    values = (np.arange(60).reshape(12, 5) % 7).astype(dtype)
    if dtype == np.complex64:
        values = values * (1 - 1j)
    result = numfuse.jit(scaled)(da.from_array(values, chunks=(5, 2)), scale)
    assert_lazy(result)
    with np.errstate(over="ignore"):
        assert_same(computed(result), scaled(values, scale))


def test_broadcasting_across_unaligned_chunks_and_numpy_operands(x2d):
    mu = np.linspace(-1, 1, 37)
    column = np.arange(203.0).reshape(203, 1)

    def fn(x, mu, column, scale):
        return (x - mu) * scale + column, np.exp(mu) * column

    jitted = numfuse.jit(fn)
    result = jitted(da.from_array(x2d, chunks=(70, 9)), da.from_array(mu, chunks=11),
                    da.from_array(column, chunks=(33, 1)), np.float64(2.0))
    assert_lazy(result)
    assert_same(computed(result), fn(x2d, mu, column, np.float64(2.0)), rtol=1e-15)


def test_mixing_dask_and_numpy_arrays(x2d):
    weights = np.random.default_rng(1).random(37)
    jitted = numfuse.jit(lambda x, w: x * w - w)
    result = jitted(da.from_array(x2d, chunks=(64, 37)), weights)
    assert_lazy(result)
    assert_same(computed(result), x2d * weights - weights)


def test_sum_of_squares_is_a_dask_tree_reduction(x2d):
    chunked = da.from_array(x2d, chunks=(30, 37))
    result = numfuse.jit(sum_of_squares)(chunked, 0.5)
    assert isinstance(result, da.Array) and result.shape == ()
    # dask adds the per-chunk sums in another order than numpy's pairwise summation
    assert_same(result.compute(), sum_of_squares(x2d, 0.5), rtol=1e-13)


def test_integer_reductions_are_exact():
    values = np.arange(-500, 500, dtype=np.int32).reshape(40, 25)
    fn = numfuse.jit(lambda x: (np.sum(x * x, axis=1), (x % 3).max(axis=0), np.sum(x > 2)))
    result = fn(da.from_array(values, chunks=(7, 6)))
    assert_lazy(result)
    assert_same(computed(result), (np.sum(values * values, axis=1),
                                   (values % 3).max(axis=0), np.sum(values > 2)))


def test_reductions_feeding_elementwise_work(x2d):
    result = numfuse.jit(centred)(da.from_array(x2d, chunks=(41, 37)))
    assert_lazy(result)
    assert_same(computed(result), centred(x2d), rtol=1e-12)


# ------------------------------------------------------------- fused reductions on dask
#
# A reduction fused into a kernel stays fused on dask: each block task returns the block's
# raw total and dask's tree reduction combines them.

_rng = np.random.default_rng(7)
CUBE = _rng.standard_normal((23, 17, 11))
INTS = _rng.integers(-100, 100, (23, 17, 11)).astype(np.int16)
BYTES = (np.arange(23 * 17 * 11) % 251).astype(np.uint8).reshape(23, 17, 11)
WITH_NAN = CUBE.copy()
WITH_NAN[4, 3, 2] = np.nan
COMPLEX = CUBE + 1j * CUBE[::-1]

FUSED = {  # name: (function, argument, relative tolerance)
    "sum": (lambda a: np.sum(a * 2 + 1), CUBE, 1e-13),
    "sum_last_axis": (lambda a: np.sum(a * 2, axis=-1), CUBE, 1e-13),
    "sum_axes_0_2": (lambda a: np.sum(a * 2, axis=(0, 2)), CUBE, 1e-13),
    "sum_keepdims": (lambda a: np.sum(a * 2, axis=(1, 2), keepdims=True), CUBE, 1e-13),
    "sum_float32": (lambda a: np.sum(a * 2, axis=(0, 2)), CUBE.astype(np.float32), 1e-5),
    "sum_complex": (lambda a: np.sum(a * 2, axis=2), COMPLEX, 1e-13),
    "prod": (lambda a: np.prod(a * 0.25 + 1, axis=(1, 2)), CUBE, 1e-13),
    "max": (lambda a: np.max(a - 1, axis=(1, 2)), CUBE, 0),
    "min_keepdims": (lambda a: (a - 1).min(axis=2, keepdims=True), CUBE, 0),
    "max_nan": (lambda a: np.max(a * 2, axis=2), WITH_NAN, 0),
    "min_nan": (lambda a: (a * 2).min(), WITH_NAN, 0),
    "mean": (lambda a: np.mean(a * 2, axis=(0, 2)), CUBE, 1e-13),
    "mean_all": (lambda a: (a * 2).mean(), CUBE, 1e-13),
    "mean_float32": (lambda a: (a * 2).mean(axis=2, keepdims=True), CUBE.astype(np.float32),
                     1e-4),
    "var_ddof": (lambda a: np.var(a * 2, axis=(0, 2), ddof=1), CUBE, 1e-12),
    "std": (lambda a: (a * 2).std(), CUBE, 1e-12),
    "int16_sum": (lambda a: np.sum(a * a, axis=(0, 2)), INTS, 0),
    "int16_max": (lambda a: np.max(a % 7, axis=2), INTS, 0),
    "int16_mean": (lambda a: np.mean(a * 3, axis=2), INTS, 1e-13),
    "uint8_sum": (lambda a: np.sum(a * a, axis=2), BYTES, 0),
    "uint8_prod_dtype": (lambda a: np.prod(a % 3 + 1, axis=2, dtype=np.uint8), BYTES, 0),
    "int8_min": (lambda a: np.min(a.astype(np.int8) + 7, axis=(1, 2)), BYTES, 0),
    "any": (lambda a: np.any(a > 90, axis=2), INTS, 0),
    "all": (lambda a: np.all(a > -95, axis=(0, 2)), INTS, 0),
    "count_true": (lambda a: np.sum(a > 0), INTS, 0),
    "outputs_and_totals": (lambda a: (a * 2, np.sum(a * 2, axis=2), np.max(a * 2)), CUBE,
                           1e-13),
    "normalised": (lambda a: a / np.abs(a).sum(axis=-1, keepdims=True), CUBE, 1e-13),
    "standardised": (lambda a: (a - a.mean(axis=2, keepdims=True))
                     / a.std(axis=2, keepdims=True), CUBE, 1e-12),
    "softmax": (lambda a: np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True), CUBE, 1e-13),
    "centred_total": (lambda a: a - np.mean(a * 2), CUBE, 1e-13),
    # accumulated across rows (kernels of passes): blocks hold whole columns, so the
    # rows are added in numpy's order, bit for bit
    "sum_axis_0": (lambda a: np.sum(a * 2, axis=0), CUBE, 0),
    "mean_axes_0_1_keepdims": (lambda a: (a * 2).mean(axis=(0, 1), keepdims=True), CUBE, 0),
    "standardised_axis_1": (lambda a: (a - a.mean(axis=1, keepdims=True))
                            / a.std(axis=1, keepdims=True), CUBE, 0),
    "standardised_axis_0": (lambda a: (a - a.mean(axis=0)) / a.std(axis=0), CUBE, 0),
    "int16_max_axis_1": (lambda a: (a % 7).max(axis=1), INTS, 0),
    "stats_axis_0": (lambda a: (a.mean(axis=0), a * 2 - a.min(axis=0), a.var(axis=0, ddof=1)),
                     CUBE, 0),
}


@pytest.mark.parametrize("chunks", [(5, 4, 3), (23, 17, 11), (7, 17, 4)])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_reductions_equal_numpy(name, chunks):
    fn, values, rtol = FUSED[name]
    result = numfuse.jit(fn)(da.from_array(values, chunks=chunks))
    assert_lazy(result)
    with np.errstate(over="ignore"):
        expected = fn(values)
    assert_same(computed(result), expected, rtol=rtol)


@pytest.fixture
def block_calls(monkeypatch):
    """Every block task's kernel and the shapes of what it returned."""
    calls = []
    original = numfuse.dask.KernelBlocks.__call__

    def spy(self, *blocks):
        results = original(self, *blocks)
        leaves = results if isinstance(results, tuple) else (results,)
        calls.append((self.kernel, [np.shape(leaf) for leaf in leaves]))
        return results

    monkeypatch.setattr(numfuse.dask.KernelBlocks, "__call__", spy)
    return calls


def test_a_block_task_returns_its_total_not_a_block_sized_temporary(x2d, block_calls):
    jitted = numfuse.jit(lambda x, mu: (np.sum((x - mu) ** 2), np.max(x * mu, axis=1)))
    expected = jitted(x2d, 0.5)  # the numpy call compiles; the dask call reuses its kernels
    result = jitted(da.from_array(x2d, chunks=(30, 10)), 0.5)
    assert_same(dask.compute(result, scheduler="sync")[0], expected, rtol=1e-13)
    kernels = set(next(iter(jitted.compiled.values())).kernels)
    assert len(jitted.compiled) == 1 and len(kernels) == 1
    assert len(block_calls) == 7 * 4
    for kernel, shapes in block_calls:
        assert kernel in kernels
        assert shapes[0] == (1, 1) and shapes[1][1] == 1  # one total per block


def test_blocks_are_combined_by_a_dask_tree_reduction(x2d):
    result = numfuse.jit(lambda x: np.prod(x * 0.1 + 1, axis=1))(
        da.from_array(x2d, chunks=(50, 2)))
    layers = list(result.__dask_graph__().layers)
    assert any(name.startswith("numfuse-multiply-partial") for name in layers)
    assert_same(result.compute(), np.prod(x2d * 0.1 + 1, axis=1), rtol=1e-13)


def test_max_of_an_empty_axis_raises_like_numpy():
    empty = da.from_array(np.empty((5, 0)), chunks=2)
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        numfuse.jit(lambda a: np.max(a + 1, axis=1))(empty)
    with pytest.raises(ValueError, match="zero-size array to reduction operation minimum"):
        numfuse.jit(lambda a: (a + 1).min())(empty)


@pytest.mark.parametrize("fn", [lambda a: np.sum(a + 1, axis=1), lambda a: np.sum(a + 1),
                                lambda a: np.max(a + 1, axis=1), lambda a: np.any(a > 0)],
                         ids=["sum_axis", "sum", "max_other_axis_empty", "any"])
def test_empty_reductions_with_an_identity(fn):
    for shape in ((0, 6), (4, 0)):
        values = np.empty(shape)
        try:
            expected = fn(values)
        except ValueError:
            continue
        assert_same(computed(numfuse.jit(fn)(da.from_array(values, chunks=2))), expected)


def test_empty_mean_and_var_warn_as_numpy_does_when_called():
    empty, values = np.empty((5, 0)), np.arange(15.0).reshape(5, 3)
    with pytest.warns(RuntimeWarning, match="Mean of empty slice") as record:
        mean = numfuse.jit(lambda a: np.mean(a + 1, axis=1))(da.from_array(empty, chunks=2))
    assert record[0].filename == __file__  # the warning points at the call
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        var = numfuse.jit(lambda a: np.var(a + 1, axis=1, ddof=3))(
            da.from_array(values, chunks=2))
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = (np.mean(empty + 1, axis=1), np.var(values + 1, axis=1, ddof=3))
        assert_same(computed((mean, var)), expected)


def test_blocks_of_size_zero_in_a_non_empty_array():
    values = np.random.default_rng(3).standard_normal((20, 12))
    chunked = da.from_array(values, chunks=((5, 0, 15), (6, 0, 6)))
    fn = numfuse.jit(lambda a: (np.max(a * 2, axis=1), (a * 2).min(), np.mean(a - 1)))
    assert_same(computed(fn(chunked)), (np.max(values * 2, axis=1), (values * 2).min(),
                                        np.mean(values - 1)), rtol=1e-13)


def test_reductions_of_regions_with_length_one_axes(x2d):
    column, row = x2d[:, :1].copy(), x2d[:1].copy()

    def fn(c, r):
        return (np.sum(c * 2, axis=0), np.sum(c * 2, axis=0, keepdims=True), np.max(r * 2),
                np.mean(r * c, axis=1), np.sum(c - r))

    result = numfuse.jit(fn)(da.from_array(column, chunks=(40, 1)),
                             da.from_array(row, chunks=(1, 10)))
    assert_same(computed(result), fn(column, row), rtol=1e-13)


def test_fused_reduction_with_a_numpy_operand_through_compiled(x2d):
    weights = x2d[0]
    compiled = numfuse.compile(lambda a, w: np.mean(a * w, axis=1), x2d, weights)
    result = compiled(da.from_array(x2d, chunks=(60, 10)), weights)
    assert_lazy(result)
    assert_same(result.compute(), np.mean(x2d * weights, axis=1), rtol=1e-13)


def test_graph_names_are_deterministic(x2d):
    jitted = numfuse.jit(lambda x: (np.sum(x * 2, axis=1), np.mean(x)))
    chunked = da.from_array(x2d, chunks=40)
    first, second = jitted(chunked), jitted(chunked)
    assert [part.name for part in first] == [part.name for part in second]


def test_non_fusible_calls_use_their_dask_equivalents(x2d):
    weights = np.random.default_rng(2).standard_normal((37, 4))

    def fn(x, w):
        y = np.tanh(x) @ w
        return y.T[1:3] * 2, x[::2, 0].reshape(-1, 2) + 1

    result = numfuse.jit(fn)(da.from_array(x2d[:200], chunks=(50, 20)), weights)
    assert_lazy(result)
    assert_same(computed(result), fn(x2d[:200], weights), rtol=1e-12)


def test_nothing_is_computed_before_compute():
    calls = []

    def block(values):
        calls.append(values.shape)
        return values

    source = da.ones((40, 6), chunks=(10, 6)).map_blocks(block, meta=np.empty((0, 0)))
    result = numfuse.jit(logp_and_grad)(source, 1.5)
    assert calls == []
    assert_same(computed(result), logp_and_grad(np.ones((40, 6)), 1.5))
    assert calls == [(10, 6)] * 4


def test_compiled_accepts_dask_arrays_of_its_signature(x2d):
    compiled = numfuse.compile(logp_and_grad, x2d, 0.25)
    result = compiled(da.from_array(x2d, chunks=60), 0.25)
    assert_lazy(result)
    assert_same(computed(result), logp_and_grad(x2d, 0.25))
    with pytest.raises(SignatureMismatchError, match="float32"):
        compiled(da.from_array(x2d.astype(np.float32), chunks=60), 0.25)


def test_unknown_chunk_sizes_raise_a_clear_error(x2d):
    chunked = da.from_array(x2d[:, 0], chunks=50)
    positive = chunked[chunked > 0]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        numfuse.jit(logp_and_grad)(positive, 0.25)
    positive.compute_chunk_sizes()
    values = x2d[:, 0][x2d[:, 0] > 0]
    assert_same(computed(numfuse.jit(logp_and_grad)(positive, 0.25)),
                logp_and_grad(values, 0.25))


def test_data_dependent_sizes_inside_the_function(x2d):
    """``x[mask]`` stays lazy (dask's own); a kernel cannot run on its unknown sizes, which
    is refused with advice rather than computed."""
    chunked = da.from_array(x2d[:, 0], chunks=50)
    column = x2d[:, 0]
    total = numfuse.jit(lambda x: x[x > 0].sum() * x)(chunked)
    assert_same(computed(total), column[column > 0].sum() * column, rtol=1e-12)
    with pytest.raises(UnsupportedOperationError, match="depends on the values"):
        numfuse.jit(lambda x: x[x > 0] * 2 + 1)(chunked)


def test_a_numpy_function_dask_lacks_is_refused_not_computed(x2d):
    fn = numfuse.jit(lambda x: np.sort(x * 2, axis=-1))
    with pytest.raises(UnsupportedOperationError, match="sort"):
        fn(da.from_array(x2d, chunks=50))


def test_scalar_only_outputs_next_to_dask_ones(x2d):
    fn = numfuse.jit(lambda x, a: (x + a, a * 2))
    lazy, scalar = fn(da.from_array(x2d, chunks=50), 1.5)
    assert isinstance(lazy, da.Array)
    assert_same(scalar, 3.0)


def test_kernel_is_a_gufunc_for_dask_apply_gufunc(x2d):
    kernel = numfuse.compile(logp_and_grad, x2d, 0.25).kernels[0]
    # The core dimension (the last axis) is one chunk; kernels expect it contiguous.
    chunked = da.from_array(x2d, chunks=(50, -1))
    result = da.apply_gufunc(kernel.gufunc, kernel.layout, chunked, 0.25,
                             output_dtypes=[np.float64, np.float64])
    assert_same(computed(tuple(result)), logp_and_grad(x2d, 0.25))


def test_kernel_and_jitted_function_with_xarray_apply_ufunc(x2d):
    xr = pytest.importorskip("xarray")
    array = xr.DataArray(x2d, dims=("time", "site")).chunk({"time": 50})
    kernel = numfuse.compile(logp_and_grad, x2d, 0.25).kernels[0]
    by_kernel = xr.apply_ufunc(kernel.gufunc, array, 0.25,
                               input_core_dims=[["site"], []],
                               output_core_dims=[["site"], ["site"]],
                               dask="parallelized", output_dtypes=[np.float64, np.float64])
    by_function = xr.apply_ufunc(numfuse.jit(logp_and_grad), array, 0.25,
                                 output_core_dims=[[], []], dask="parallelized",
                                 output_dtypes=[np.float64, np.float64])
    expected = logp_and_grad(x2d, 0.25)
    for result in (by_kernel, by_function):
        assert all(isinstance(part.data, da.Array) for part in result)
        assert_same(tuple(part.values for part in result), expected)


def test_jitted_functions_pickle_and_compile_again(x2d):
    cloudpickle = pytest.importorskip("cloudpickle")
    jitted = numfuse.jit(lambda x, mu: logp_and_grad(x, mu))
    jitted(x2d, 0.25)
    restored = cloudpickle.loads(cloudpickle.dumps(jitted))
    assert isinstance(restored, numfuse.Jitted) and restored.compiled == {}
    assert_same(restored(x2d, 0.25), logp_and_grad(x2d, 0.25))
    static = numfuse.jit(lambda x, n: x * n, static_argnums=(1,))
    assert pickle.loads(cloudpickle.dumps(static)).static_argnums == (1,)


def test_module_level_jitted_function_pickles_by_name():
    assert pickle.loads(pickle.dumps(module_level)) is module_level


@numfuse.jit
def module_level(x):
    return x + 1


def test_kernels_pickle_as_source_and_compile_again(x2d):
    kernel = numfuse.compile(logp_and_grad, x2d, 0.25).kernels[0]
    restored = pickle.loads(pickle.dumps(kernel))
    assert (restored.source, restored.layout, restored.n_inputs, restored.n_outputs) == \
        (kernel.source, kernel.layout, kernel.n_inputs, kernel.n_outputs)
    assert_same(restored.gufunc(x2d, 0.25), kernel.gufunc(x2d, 0.25))


def test_block_tasks_pickle(x2d):
    result = numfuse.jit(logp_and_grad)(da.from_array(x2d, chunks=50), 0.25)
    cloudpickle = pytest.importorskip("cloudpickle")
    graph = cloudpickle.loads(cloudpickle.dumps(dict(result[0].__dask_graph__())))
    assert len(graph) == len(result[0].__dask_graph__())


def test_on_distributed_worker_processes(x2d):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        jitted = numfuse.jit(lambda x, mu: (np.sum((x - mu) ** 2, axis=1), -(x - mu)))
        chunked = da.from_array(x2d, chunks=(51, 37))
        squares, negated = client.compute(jitted(chunked, 0.25), sync=True)
        pids = client.run(lambda: __import__("os").getpid())
        assert len(set(pids.values())) == 2
    assert_same(negated, -(x2d - 0.25))
    assert_same(squares, np.sum((x2d - 0.25) ** 2, axis=1), rtol=1e-14)


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, check=False)


def test_without_dask_nothing_changes_and_the_error_names_the_extra():
    result = _run_python("""
        import sys
        sys.modules["dask"] = None  # as if dask were not installed
        import numpy as np
        import numfuse
        print(numfuse.jit(lambda x: x * 2)(np.ones(3)).sum())
        try:
            import numfuse.dask
        except ImportError as error:
            print(error)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "6.0"
    assert "pip install 'numfuse[dask]'" in result.stdout


def test_numfuse_does_not_import_dask():
    result = _run_python("""
        import sys
        import numpy as np
        import numfuse
        numfuse.jit(lambda x: x * 2)(np.ones(3))
        print("dask" in sys.modules)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_dask_runs_the_programs_interpreter_with_its_own_runners(x2d, monkeypatch):
    seen = []
    original = Program.interpret

    def spy(self, args, out=None, runners=None):
        seen.append([type(runner).__name__ for runner in runners])
        return original(self, args, out, runners)

    monkeypatch.setattr(Program, "interpret", spy)

    def fn(x):
        return np.cumsum(x * 2, axis=1) + 1

    result = numfuse.jit(fn)(da.from_array(x2d, chunks=50))
    assert seen == [["DaskKernel", "LazyCall", "DaskKernel"]]
    assert_same(computed(result), fn(x2d))


def test_dask_imports_no_private_name_of_the_runtime():
    tree = ast.parse(Path(numfuse.dask.__file__).read_text())
    imported = [alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.level == 1
                and node.module == "runtime" for alias in node.names]
    attributes = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name) and node.value.id == "runtime"]
    assert imported
    assert [name for name in imported + attributes if name.startswith("_")] == []


@pytest.mark.parametrize("fn", [lambda x: np.std(x), lambda x: np.var(x, axis=0),
                                lambda x: x.std(), lambda x: x.astype(np.float32).std(),
                                lambda x: np.var(x, axis=0, ddof=1)],
                         ids=["std", "var-axis", "method", "float32", "ddof"])
def test_var_and_std_of_a_dask_array_over_all_or_some_axes(fn):
    """Their mean divided a dask array as a numpy scalar: a 0-d result where tracing
    found the kept axes (a CallShapeError)."""
    values = np.arange(12.0).reshape(4, 3) ** 1.5
    result = numfuse.jit(fn)(da.from_array(values, chunks=2))
    expected = fn(values)
    np.testing.assert_allclose(np.asarray(result), expected, rtol=1e-6)
    assert np.asarray(result).dtype == expected.dtype


@pytest.mark.parametrize("fn", [
    lambda x: x.flatten() * 2,
    lambda x: x.reshape(-1) + 1,
    lambda x: x.reshape(12) + 1,
    lambda x: np.nan_to_num(x) * 2,
], ids=["flatten", "reshape-minus-one", "reshape-int", "nan-to-num"])
def test_calls_dask_takes_are_handed_to_it_in_its_forms(fn):
    """Found by a conformance hunt: ``x.flatten()``, ``x.reshape(12)`` and
    ``np.nan_to_num(x)`` reached dask with every default spelt out (``order=``, a bare
    int shape, ``copy=``), which dask's own functions refuse."""
    values = np.arange(12.0).reshape(3, 4)
    x = da.from_array(values, chunks=2)
    result = numfuse.jit(fn)(x)
    assert isinstance(result, da.Array)
    assert_same(result.compute(), fn(values))
    assert_same(numfuse.jit(fn)(values), fn(values))


def test_out_with_dask_arguments_is_refused_saying_why():
    """Found by a conformance hunt: ``out=`` with dask arguments was ignored by a
    Compiled (the array stayed zeros) and passed to the function by a jitted one (an
    unexpected keyword)."""
    values = np.arange(6.0)
    x = da.from_array(values, chunks=3)
    out = np.zeros(6)
    with pytest.raises(TypeError, match="out= takes numpy arrays"):
        numfuse.jit(lambda v: v * 2)(x, out=out)
    with pytest.raises(TypeError, match="out= takes numpy arrays"):
        numfuse.compile(lambda v: v * 2, values)(x, out=out)
    assert not out.any()
