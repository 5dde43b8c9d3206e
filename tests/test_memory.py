"""Memory for results: the pool of reused blocks (on by default), and
retain_freed_memory (glibc's malloc keeps freed large blocks; opt-in, process-wide)."""

from __future__ import annotations

import copy
import dataclasses
import mmap
import os
import pickle
import platform
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import assert_same

import numfuse
from numfuse import memory
from numfuse.runtime import Program

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="the setting exists in glibc's malloc only")
def test_glibc_accepts_the_settings():
    assert numfuse.retain_freed_memory(64 << 20) is True


def test_without_a_c_library_it_returns_false(monkeypatch):
    monkeypatch.setattr(memory.ctypes.util, "find_library", lambda name: "no-such-libc.so")
    assert memory.retain_freed_memory(1 << 40) is False


@pytest.mark.skipif(not GLIBC, reason="the setting exists in glibc's malloc only")
def test_the_environment_variable_applies_it_at_import():
    code = ("import numfuse.memory as m, unittest.mock as u\n"
            "calls = []\n"
            "with u.patch.object(m, 'retain_freed_memory', lambda: calls.append(1)):\n"
            "    m._from_environment()\n"
            "print(len(calls))\n")
    for value, expected in (("1", "1"), ("0", "0")):
        env = {**os.environ, "NUMFUSE_RETAIN_MEMORY": value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
        assert out == expected


# ---------------------------------------------------------------- the memory pool
# Results of 1e5 float64 (800 kB) come from the pool (from 256 KiB by default; the tests
# set that threshold, so that they hold whatever the default).

N = 100_000


def logp_and_grad(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


def centred(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def two_kernels(x, mu):
    d = np.exp(x - mu)  # a temporary between the kernels
    return np.sort(d)[::-1] * d, d.sum()


@pytest.fixture(autouse=True)
def empty_pool():
    """Each test starts with an empty pool in its default settings (and a 256 KiB
    threshold), and leaves it so."""
    settings = memory.pool()
    memory.release_pool()
    memory.pool(min_bytes=256 << 10)  # so that results of N elements come from the pool
    yield
    memory.pool(**dataclasses.asdict(settings))
    memory.release_pool()


@pytest.fixture
def x():
    return np.random.default_rng(0).standard_normal(N)


def single_threaded(fn):
    """A jitted function whose calls run in the calling thread: a call split over
    threads may leave its last chunk's outputs referenced by a worker until its next
    task, which delays when their blocks come back (never a reuse while referenced)."""
    return numfuse.jit(fn, threads=1)


def pooled(array):
    """Whether ``array``'s memory is lent by the pool (its base chain ends in a block's
    mapping)."""
    while isinstance(array, np.ndarray):
        array = array.base
    return isinstance(array, mmap.mmap)


def stats_delta(before, after):
    return {"hits": after.hits - before.hits, "misses": after.misses - before.misses}


@pytest.mark.parametrize("fn, args", [
    (logp_and_grad, lambda x: (x, 0.25)),
    (logp_and_grad, lambda x: (x.reshape(400, 250), np.linspace(0, 1, 250))),
    (centred, lambda x: (x.reshape(500, 200),)),
    (two_kernels, lambda x: (x, 0.5)),
    (lambda a, b: np.exp(-((a[:, None] - b[None, :]) ** 2)), lambda x: (x[:500], x[:400])),
    (lambda x: (x * 2).astype(np.float32) + np.float32(1), lambda x: (x,)),
], ids=["logp", "broadcast-rows", "passes", "temporaries", "outer", "float32"])
def test_values_are_the_same_with_and_without_the_pool(fn, args, x):
    arguments = args(x)
    on = numfuse.jit(fn)(*arguments)
    memory.pool(enabled=False)
    off = numfuse.jit(fn)(*arguments)
    assert_same(on, off)
    assert_same(on, fn(*arguments), rtol=1e-13)
    leaves = on if isinstance(on, tuple) else (on,)
    assert any(pooled(leaf) for leaf in leaves)
    assert not any(pooled(leaf) for leaf in (off if isinstance(off, tuple) else (off,)))


def test_results_are_ordinary_writeable_aligned_arrays(x):
    logp, grad = numfuse.jit(logp_and_grad)(x, 0.25)
    for result in (logp, grad):
        assert type(result) is np.ndarray and pooled(result)
        assert result.flags.writeable and result.flags.c_contiguous
        assert result.ctypes.data % 64 == 0
        result[:] = 1.0  # writing is allowed and touches nothing else
    assert not np.shares_memory(logp, grad) and not np.shares_memory(logp, x)
    assert (logp == 1).all() and (grad == 1).all()


def test_a_dropped_result_gives_its_block_to_the_next_call(x):
    jitted = single_threaded(logp_and_grad)
    logp, grad = jitted(x, 0.25)
    addresses = {logp.ctypes.data, grad.ctypes.data}
    del logp, grad
    before = memory.pool_stats()
    logp, grad = jitted(x, 0.5)
    assert {logp.ctypes.data, grad.ctypes.data} == addresses
    assert stats_delta(before, memory.pool_stats()) == {"hits": 2, "misses": 0}
    assert_same((logp, grad), logp_and_grad(x, 0.5))


def test_the_blocks_written_last_are_lent_again_first(x):
    """Results dropped at once reuse the same two blocks (the memory last written, still
    in the caches), however many blocks of the class the pool holds; results kept until
    the next call has returned cycle through four."""
    jitted = single_threaded(logp_and_grad)
    held = [jitted(x, mu) for mu in (0.0, 1.0, 2.0, 3.0)]  # eight blocks of the class
    del held
    def addresses(results):
        return {result.ctypes.data for result in results}

    last = addresses(jitted(x, 0.25))
    for mu in (0.5, 0.75, 1.0):
        assert addresses(jitted(x, mu)) == last
    seen = []
    results = jitted(x, 0.0)
    for mu in (1.0, 2.0, 3.0, 4.0):
        results = jitted(x, mu)  # the previous results live until this call returns
        seen.append(addresses(results))
        assert_same(results, logp_and_grad(x, mu))
    assert seen[0] == seen[2] and seen[1] == seen[3] and not seen[0] & seen[1]
    assert memory.pool_stats().cached_blocks + memory.pool_stats().leased_blocks == 8


def test_a_block_is_never_reused_while_a_view_of_it_lives(x):
    jitted = single_threaded(logp_and_grad)
    logp, grad = jitted(x, 0.25)
    expected = logp[1::3].copy()
    view = logp[1::3]
    kept = grad.reshape(100, -1)[5]
    kept_expected = kept.copy()
    del logp, grad
    for mu in (1.0, 2.0, 3.0):
        again = jitted(x, mu)
        assert not any(np.shares_memory(result, view) or np.shares_memory(result, kept)
                       for result in again)
        del again
    assert_same(view, expected)
    assert_same(kept, kept_expected)
    leased = memory.pool_stats().leased_blocks
    del view
    assert memory.pool_stats().leased_blocks == leased - 1
    del kept
    assert memory.pool_stats().leased_blocks == leased - 2


def test_a_pickled_result_unpickles_to_an_ordinary_array(x):
    logp, _grad = numfuse.jit(logp_and_grad)(x, 0.25)
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        restored = pickle.loads(pickle.dumps(logp, protocol=protocol))
        assert type(restored) is np.ndarray and not pooled(restored)
        assert_same(restored, logp)
    assert not pooled(copy.deepcopy(logp)) and not pooled(logp.copy())


def test_out_arrays_are_written_and_nothing_is_taken_from_the_pool(x):
    jitted = single_threaded(logp_and_grad)
    jitted(x, 0.25)
    out = (np.empty_like(x), np.empty_like(x))
    before = memory.pool_stats()
    result = jitted(x, 0.25, out=out)
    assert result[0] is out[0] and result[1] is out[1]
    assert_same(out, logp_and_grad(x, 0.25))
    assert stats_delta(before, memory.pool_stats()) == {"hits": 0, "misses": 0}


def sum_and_gradient(x, mu):
    d = x - mu
    return {"value": np.sum(d * d), "gradient": 2 * d}


@pytest.mark.parametrize("fn", [logp_and_grad, sum_and_gradient])
def test_pooled_results_come_from_the_call_caches_shortcut(fn, x, monkeypatch):
    # A repeated call takes its plan's shortcut — the kernel alone, with outputs from the
    # pool — not the program's interpreter (which cost as much as the kernel at 1e5).
    interpreted = []
    original = Program.interpret

    def spy(self, args):
        interpreted.append(len(args))
        return original(self, args)

    monkeypatch.setattr(Program, "interpret", spy)
    jitted = single_threaded(fn)
    jitted(x, 0.25)
    interpreted.clear()
    for mu in (0.5, 0.75):
        result = jitted(x, mu)
        leaves = tuple(result.values()) if isinstance(result, dict) else result
        assert_same(result, fn(x, mu), rtol=1e-12)
        assert any(pooled(leaf) for leaf in leaves)
    assert interpreted == []


def test_calls_from_many_threads_never_share_a_block(x):
    jitted = numfuse.jit(logp_and_grad)
    expected = {mu: logp_and_grad(x, mu) for mu in range(8)}

    def work(mu):
        results = [jitted(x, float(mu)) for _ in range(10)]  # all alive together
        return mu, results

    with ThreadPoolExecutor(4) as executor:
        finished = list(executor.map(work, range(8)))
    arrays = []
    for mu, results in finished:
        for result in results:
            assert_same(result, expected[mu])
            arrays += result
    addresses = [array.ctypes.data for array in arrays]
    assert len(set(addresses)) == len(arrays)
    del finished, arrays, results, result
    stats = memory.pool_stats()
    assert stats.leased_blocks == 0 and stats.cached_blocks > 0


def test_dask_blocks_use_the_pool_and_compute_numpys_values(x):
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    values = x.reshape(1000, 100)
    jitted = numfuse.jit(logp_and_grad)
    lazy = jitted(da.from_array(values, chunks=(500, 100)), 0.25)
    before = memory.pool_stats()
    result = dask.compute(lazy, scheduler="threads")[0]
    assert_same(result, logp_and_grad(values, 0.25))
    after = memory.pool_stats()
    assert after.misses + after.hits > before.misses + before.hits
    assert_same(pickle.loads(pickle.dumps(result)), result)


def test_the_free_blocks_stay_within_the_limit(x):
    memory.pool(limit=3 * 800 * 1024)
    jitted = single_threaded(logp_and_grad)
    results = [jitted(x, float(mu)) for mu in range(4)]  # 8 blocks leased
    assert memory.pool_stats().leased_blocks == 8
    del results
    stats = memory.pool_stats()
    assert stats.leased_blocks == 0
    assert 0 < stats.cached_bytes <= 3 * 800 * 1024
    memory.pool(limit=0)
    assert memory.pool_stats().cached_bytes == 0


def test_a_result_larger_than_the_limit_comes_from_numpy(x):
    memory.pool(limit=N * 8 // 2)
    logp, _grad = numfuse.jit(logp_and_grad)(x, 0.25)
    assert not pooled(logp)


def test_blocks_passed_over_by_other_allocations_are_released(x):
    memory.pool(idle_allocations=16)
    jitted = single_threaded(logp_and_grad)
    jitted(x, 0.25)  # two blocks of one size class, free once the call returns
    assert memory.pool_stats().cached_blocks == 2
    other = np.ones(3 * N)
    for _ in range(20):  # another size class: its blocks are reused, the others idle
        jitted(other, 0.25)
    stats = memory.pool_stats()
    assert stats.cached_bytes == 2 * memory.size_class(3 * N * 8)


def test_idle_blocks_are_released_after_idle_seconds_without_calls(x):
    memory.pool(idle_seconds=0.2)
    jitted = single_threaded(logp_and_grad)
    jitted(x, 0.25)
    assert memory.pool_stats().cached_blocks == 2
    deadline = time.monotonic() + 10
    while memory.pool_stats().cached_blocks and time.monotonic() < deadline:
        time.sleep(0.05)
    assert memory.pool_stats().cached_blocks == 0


def test_release_pool_frees_the_cached_blocks_only(x):
    jitted = single_threaded(logp_and_grad)
    kept = jitted(x, 0.25)
    jitted(x, 0.5)
    released = memory.release_pool()
    assert released == 2 * memory.size_class(N * 8)
    stats = memory.pool_stats()
    assert stats.cached_blocks == 0 and stats.leased_blocks == 2
    assert_same(kept, logp_and_grad(x, 0.25))


def test_opting_out_gives_numpy_allocated_results(x):
    jitted = single_threaded(logp_and_grad)
    kept = jitted(x, 0.25)
    jitted(x, 0.5)
    settings = memory.pool(enabled=False)
    assert settings.enabled is False and memory.pool_stats().cached_blocks == 0
    assert not any(pooled(result) for result in jitted(x, 0.25))
    del kept  # lent before: its blocks are released, not cached
    stats = memory.pool_stats()
    assert stats.leased_blocks == 0 and stats.cached_blocks == 0


def test_small_results_come_from_numpy():
    logp, _grad = numfuse.jit(logp_and_grad)(np.ones(1000), 0.25)
    assert not pooled(logp)
    assert memory.empty((10,), np.float64).base is None
    assert memory.empty((N,), object).base is None


def test_a_failed_mapping_releases_the_cached_blocks_and_retries(x, monkeypatch):
    jitted = single_threaded(logp_and_grad)
    jitted(x, 0.25)
    assert memory.pool_stats().cached_blocks == 2
    real = memory._Block.__init__
    failures = iter([True])

    def flaky(self, size):
        if next(failures, False):
            raise OSError(12, "Cannot allocate memory")
        real(self, size)

    monkeypatch.setattr(memory._Block, "__init__", flaky)
    result = memory.empty((3 * N,), np.float64)  # a miss: another size class
    assert pooled(result) and memory.pool_stats().cached_blocks == 0


def test_a_mapping_that_fails_twice_gives_numpys_memory_for_a_while(monkeypatch):
    # e.g. more live pooled arrays than the system allows mappings (vm.max_map_count)
    tried = []

    def failing(self, size):
        tried.append(size)
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(memory._Block, "__init__", failing)
    result = memory.empty((N,), np.float64)
    assert type(result) is np.ndarray and not pooled(result) and len(tried) == 2
    result[:] = 1.0
    for _ in range(10):  # no new attempt for a while: each would cost a collection
        assert not pooled(memory.empty((N,), np.float64))
    assert len(tried) == 2 and memory.pool_stats().leased_blocks == 0
    monkeypatch.undo()
    memory._pool.unmappable_until = 0
    assert pooled(memory.empty((N,), np.float64))


def test_an_array_dropped_while_the_pool_is_locked_is_taken_back_later(x):
    array = memory.empty((N,), np.float64)
    with memory._pool.lock:  # as when the collector drops an array during an allocation
        del array
    stats = memory.pool_stats()
    assert stats.cached_blocks == 1 and stats.leased_blocks == 0


def test_a_forked_child_never_shares_a_block_with_its_parent():
    # The child writes into a pooled result; the parent's copy must not change (its block
    # is reused by the parent while the child may still hold the array).
    code = ("import os, numpy as np\n"
            "from numfuse import memory\n"
            "memory.pool(min_bytes=1 << 16)\n"
            "result = memory.empty((100_000,), np.float64)\n"
            "result[:] = 1.0\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    result[:] = 7.0\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "print(result.min(), result.max())\n")
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["1.0", "1.0"]


@pytest.mark.parametrize("nbytes", [1, 4095, 4096, 4097, 65536, 100_000, 800_000, 10**9])
def test_size_classes_are_pages_at_most_an_eighth_larger(nbytes):
    size = memory.size_class(nbytes)
    assert size >= nbytes and size % 4096 == 0
    assert size <= max(4096, nbytes * 9 // 8 + 4096)
    assert memory.size_class(size) == size


@pytest.mark.parametrize("options, error", [
    ({"enabled": "no"}, TypeError),
    ({"limit": -1}, ValueError),
    ({"limit": 1.5}, ValueError),
    ({"min_bytes": True}, ValueError),
    ({"idle_seconds": 0}, ValueError),
    ({"idle_allocations": 0}, ValueError),
])
def test_bad_settings_are_refused_with_what_to_pass(options, error):
    with pytest.raises(error, match=f"pool\\({next(iter(options))}=\\.\\.\\.\\) takes"):
        memory.pool(**options)


@pytest.mark.parametrize("text, expected", [
    ("1048576", 1 << 20), ("512K", 512 << 10), ("64M", 64 << 20), ("2G", 2 << 30),
    ("1.5GiB", 3 << 29), (" 8 mb ", 8 << 20),
])
def test_byte_counts_are_read_with_units(text, expected):
    assert memory.parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["lots", "-1M", "", "inf"])
def test_bad_byte_counts_say_how_to_write_them(text):
    with pytest.raises(ValueError, match="byte count"):
        memory.parse_bytes(text)


@pytest.mark.parametrize("variables, enabled, limit", [
    ({"NUMFUSE_MEMORY_POOL": "0"}, False, None),
    ({"NUMFUSE_MEMORY_POOL": "off", "NUMFUSE_MEMORY_POOL_LIMIT": "64M"}, False, 64 << 20),
    ({"NUMFUSE_MEMORY_POOL_LIMIT": "64M"}, True, 64 << 20),
])
def test_the_environment_variables_configure_the_pool(monkeypatch, variables, enabled, limit):
    monkeypatch.delenv("NUMFUSE_RETAIN_MEMORY", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    default = memory.pool().limit
    memory._from_environment()  # what importing numfuse does
    settings = memory.pool()
    assert settings.enabled is enabled
    assert settings.limit == (default if limit is None else limit)


@pytest.mark.parametrize("name, value", [("NUMFUSE_MEMORY_POOL", "maybe"),
                                         ("NUMFUSE_MEMORY_POOL_LIMIT", "lots")])
def test_bad_environment_values_are_warned_about_and_ignored(monkeypatch, name, value):
    monkeypatch.delenv("NUMFUSE_RETAIN_MEMORY", raising=False)
    monkeypatch.setenv(name, value)
    before = memory.pool()
    with pytest.warns(RuntimeWarning, match=f"{name}.* ignored"):
        memory._from_environment()
    assert memory.pool() == before


def test_with_glibc_its_heap_serves_arrays_up_to_32_mib_and_the_pool_larger_ones():
    """glibc maps and unmaps blocks of 256 KiB and more until one that large was freed:
    numfuse frees one at import, and its pool takes the larger arrays only (the heap's
    blocks, just left by numpy's arrays, are in the caches)."""
    import ctypes

    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018
    except AttributeError:
        pytest.skip("not glibc")
    assert memory._default_settings().min_bytes == memory.HEAP_BYTES
    code = (
        "import ctypes, sys, numpy as np\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.sbrk.restype = ctypes.c_void_p\n"
        "libc.sbrk.argtypes = [ctypes.c_ssize_t]\n"
        "if sys.argv[1] == 'numfuse':\n"
        "    import numfuse\n"
        "a = np.empty(10**6)\n"
        "print(int(a.ctypes.data < libc.sbrk(0)))\n")  # below the heap's end: the heap's
    plain = {key: value for key, value in os.environ.items() if not key.startswith("MALLOC_")}
    in_heap = {name: subprocess.run([sys.executable, "-c", code, name], capture_output=True,
                                    text=True, check=True, env=plain).stdout.strip()
               for name in ("numpy", "numfuse")}
    assert in_heap == {"numpy": "0", "numfuse": "1"}  # an 8 MB array: mapped, or the heap's
    # glibc's thresholds set by the environment (dask.distributed sets this one): glibc
    # keeps mapping such blocks, and the pool takes them from 256 KiB
    settings = "from numfuse import memory; print(memory.pool().min_bytes)"
    tuned = subprocess.run([sys.executable, "-c", settings], capture_output=True, text=True,
                           check=True, env={**plain, "MALLOC_TRIM_THRESHOLD_": "65536"})
    assert int(tuned.stdout) == 256 << 10


def test_a_block_is_never_lent_to_two_threads_at_once(monkeypatch):
    """Found by a conformance hunt: a block was taken under the pool's lock but the array
    on it made after, and in between it looked free to another thread's allocation (or
    the trimmer), which lent it again: a held result was overwritten by another thread's
    call.  Here another thread allocates as soon as the lock is released."""
    memory.pool(min_bytes=256 << 10)
    shape = (100_000,)
    warm = memory.empty(shape, np.float64)
    del warm  # a free block of the size class, to be lent
    others: list[np.ndarray] = []

    class Releasing:
        """The pool's lock; its first release lets another thread allocate at once."""

        def __init__(self, lock):
            self.lock, self.released = lock, False

        def __enter__(self):
            return self.lock.__enter__()

        def __exit__(self, *exc):
            self.lock.__exit__(*exc)
            if not self.released:
                self.released = True
                helper = threading.Thread(
                    target=lambda: others.append(memory.empty(shape, np.float64)))
                helper.start()
                helper.join(10)

    monkeypatch.setattr(memory._pool, "lock", Releasing(memory._pool.lock))
    mine = memory.empty(shape, np.float64)
    assert len(others) == 1 and not np.shares_memory(mine, others[0])
