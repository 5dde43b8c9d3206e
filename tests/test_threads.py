"""Large calls split across threads: numpy's results whichever way a call is cut, errors
and floating-point state carried over from the threads, and when a call stays on one."""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import math
import multiprocessing
import os
import platform
import threading
import time
import weakref

import numpy as np
import pytest
from conftest import assert_same

import numfuse
from numfuse import spinning, threads
from numfuse.runtime import LocalRunner

RNG = np.random.default_rng(5)


@pytest.fixture(params=["native", "python"])
def chunk_calls(request, monkeypatch):
    """Counts the chunks each split call ran (the split really happens), with chunks run
    natively where this machine can, and as gufunc calls in Python."""
    calls: list[int] = []
    if request.param == "native" and not threads.native_runs():
        pytest.skip("chunks do not run natively on this machine")
    if request.param == "python":
        monkeypatch.setattr(threads, "native_runs", lambda: False)
    original, original_native = threads.run_chunks, threads.run_native

    def spy(work, count, count_threads):
        calls.append(count)
        return original(work, count, count_threads)

    def native_spy(chunks, count_threads):
        calls.append(chunks.count)
        return original_native(chunks, count_threads)

    monkeypatch.setattr(threads, "run_chunks", spy)
    monkeypatch.setattr(threads, "run_native", native_spy)
    return calls


def logp_and_sums(x, mu):
    d = x - mu
    logp = -(d**2) / 2
    return logp, -d, logp.sum(), np.max(d), np.mean(d > 0)


def test_a_large_call_is_split_and_equals_numpy(chunk_calls):
    x = RNG.standard_normal(600_000)
    jitted = numfuse.jit(logp_and_sums, threads=2)
    jitted(x, 0.25)  # the first large call runs on one thread and measures the kernel
    assert chunk_calls == []
    result = jitted(x, 0.25)
    assert chunk_calls and chunk_calls[0] >= 2
    expected = logp_and_sums(x, 0.25)
    assert_same(result[:2], expected[:2])
    assert_same(result[2], expected[2], rtol=1e-12)
    assert_same(result[3:], expected[3:])


def test_the_same_call_on_one_thread_is_not_split(chunk_calls):
    x = RNG.standard_normal(600_000)
    numfuse.jit(logp_and_sums, threads=1)(x, 0.25)
    assert chunk_calls == []


def test_small_calls_stay_on_one_thread(chunk_calls):
    numfuse.jit(logp_and_sums, threads=2)(RNG.standard_normal(1000), 0.25)
    assert chunk_calls == []


def test_many_short_rows_are_split_by_rows(chunk_calls):
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True), e.sum(axis=-1)

    x = RNG.standard_normal((20_000, 50))
    jitted = numfuse.jit(softmax, threads=2)
    jitted(x)
    result = jitted(x)
    assert chunk_calls
    assert_same(result, softmax(x), rtol=1e-14)


def test_an_outer_broadcast_is_split(chunk_calls):
    def rbf(a, b):
        d = a - b
        k = np.exp(-d * d / 2)
        return k, k.sum(axis=1)

    a, b = RNG.standard_normal((700, 1)), RNG.standard_normal((1, 900))
    jitted = numfuse.jit(rbf, threads=2)
    jitted(a, b)
    result = jitted(a, b)
    assert chunk_calls
    assert_same(result, rbf(a, b), rtol=1e-13)


def test_strided_two_dimensional_input_split_along_the_core_axis(chunk_calls):
    x = RNG.standard_normal((3, 400_000))[:, ::2]

    def fn(x):
        y = np.sqrt(np.abs(x)) + 1.0
        return y, y.sum(axis=-1), y.min()

    jitted = numfuse.jit(fn, threads=2)
    jitted(x)
    result = jitted(x)
    assert chunk_calls
    assert_same(result, fn(x), rtol=1e-12)


def test_errstate_raise_reaches_the_caller_from_every_thread():
    x = np.ones(600_000)
    x[-1] = 0.0  # in the last chunk, which a helper thread may run
    inverse = numfuse.jit(lambda x: 1.0 / x, threads=2)
    with np.errstate(divide="ignore"):
        inverse(x)  # measured on one thread
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide"):
        inverse(x)
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        result = inverse(x)
    with np.errstate(divide="ignore"):
        assert_same(result, 1.0 / x)


def test_an_error_inside_a_chunk_is_raised_once():
    x = np.full(600_000, 2, dtype=np.int64)
    x[-5] = -1
    power = numfuse.jit(lambda x: np.int64(3) ** (x + 0), threads=2)
    power(np.abs(x))
    with pytest.raises(ValueError, match="Integers to negative integer powers"):
        power(x)


def test_thread_count_rules():
    assert threads.resolve(3, lambda: 8) == 3
    assert threads.resolve(None, lambda: 2) == 2
    seen = []
    worker = threading.Thread(target=lambda: seen.append(threads.resolve(None, lambda: 4)))
    worker.start()
    worker.join()
    assert seen == [1]  # a call from another thread (a pool, a dask worker) stays serial
    assert threads.chunk_count(1e-5, 10**6, 4) == 1
    assert threads.chunk_count(1e-2, 10**6, 2) == 2 * threads.CHUNKS_PER_THREAD
    assert threads.chunk_count(1e-2, 10_000, 2) == 2
    assert threads.chunk_count(7.5e-4, 10**6, 2) == 8  # not 7: a multiple of the threads
    assert threads.chunk_count(5.5e-4, 10**6, 2) == 6
    assert threads.chunk_count(3e-4, 10**6, 4) == 4


def test_chunks_run_on_several_threads_and_all_run():
    done: list[int] = []
    names: set[str] = set()
    barrier = threading.Barrier(2, timeout=5)

    def work(index):
        if index < 2:
            barrier.wait()  # two chunks are in flight at once
        names.add(threading.current_thread().name)
        done.append(index)

    threads.run_chunks(work, 10, 2)
    assert sorted(done) == list(range(10))
    assert len(names) == 2


def _two_threads_meet(count):
    """A ``work`` for ``count`` chunks whose first two run at once on two threads, and
    what it saw: the chunks done and the threads' names."""
    done: list[int] = []
    names: set[str] = set()
    barrier = threading.Barrier(2, timeout=5)

    def work(index):
        if index < 2:
            barrier.wait()
        names.add(threading.current_thread().name)
        done.append(index)

    return work, done, names


def test_helpers_that_went_to_sleep_are_woken_for_the_next_call():
    for _ in range(3):
        time.sleep(20 * threads.SPIN_SECONDS)  # the helpers stop spinning and sleep
        work, done, names = _two_threads_meet(4)
        threads.run_chunks(work, 4, 2)
        assert sorted(done) == [0, 1, 2, 3] and len(names) == 2


def test_helpers_without_the_native_spin_sleep_and_still_run_chunks(monkeypatch):
    monkeypatch.setattr(spinning, "spinner", lambda: None)
    crew = threads._Crew(1)
    assert crew.spinner is None
    for _ in range(3):
        work, done, names = _two_threads_meet(6)
        crew.run(work, 6, 2)
        assert sorted(done) == list(range(6)) and len(names) == 2


def test_helpers_spinning_without_the_task_runner_run_python_chunks(monkeypatch):
    spinner = spinning.spinner()
    if spinner is None:
        pytest.skip("no native spin on this platform")
    monkeypatch.setattr(spinning, "spinner", lambda: spinning.Spinner(native=False))
    crew = threads._Crew(1)
    assert crew.spinner is not None and not crew.native
    for _ in range(3):
        work, done, names = _two_threads_meet(6)
        crew.run(work, 6, 2)
        assert sorted(done) == list(range(6)) and len(names) == 2


def test_the_spin_of_the_helpers_is_set_from_the_environment(monkeypatch):
    if spinning.spinner() is None:
        pytest.skip("no native spin on this platform")
    monkeypatch.setenv("NUMFUSE_SPIN_SECONDS", "0")
    assert threads.spin_seconds() == 0.0
    sleeper = threads._Crew(1)
    assert sleeper.spin == 1  # one turn: a helper sleeps at once
    monkeypatch.setenv("NUMFUSE_SPIN_SECONDS", "0.002")
    assert threads._Crew(1).spin > 100 * sleeper.spin
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("NUMFUSE_SPIN_SECONDS", bad)
        with pytest.warns(RuntimeWarning, match="NUMFUSE_SPIN_SECONDS"):
            assert threads.spin_seconds() == threads.SPIN_SECONDS
    work, done, names = _two_threads_meet(4)
    sleeper.run(work, 4, 2)  # a helper that never spins still runs its chunks
    assert sorted(done) == [0, 1, 2, 3] and len(names) == 2


def test_the_first_exception_of_a_chunk_is_raised_and_later_chunks_are_skipped():
    ran: list[int] = []

    def work(index):
        ran.append(index)
        if index == 1:
            raise KeyError(index)

    with pytest.raises(KeyError):
        threads.run_chunks(work, 200, 2)
    assert 1 in ran and len(ran) < 200
    work, done, _names = _two_threads_meet(5)  # the helpers are ready for the next call
    threads.run_chunks(work, 5, 2)
    assert sorted(done) == list(range(5))


def test_callers_on_several_threads_split_at_once_and_all_finish():
    x = RNG.standard_normal(300_000)
    jitted = numfuse.jit(logp_and_sums, threads=2)
    expected = logp_and_sums(x, 0.25)
    errors: list[BaseException] = []

    def caller():
        try:
            for _ in range(15):
                result = jitted(x, 0.25)
                assert_same(result[:2], expected[:2])
        except BaseException as error:
            errors.append(error)

    callers = [threading.Thread(target=caller) for _ in range(3)]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join(timeout=120)
    assert not errors and not any(thread.is_alive() for thread in callers)


def test_helpers_keep_no_reference_to_a_finished_call():
    """A split call's chunks hold views of its results: the pool lends their blocks again
    only once nothing references them, so the helpers must not keep them."""
    meet, done, names = _two_threads_meet(4)
    payload = np.zeros(10)
    reference = weakref.ref(payload)

    def work(index, payload=payload):  # bound, not a cell that ``del`` would empty
        meet(index)
        payload.sum()

    threads.run_chunks(work, 4, 2)
    assert sorted(done) == [0, 1, 2, 3] and len(names) == 2
    del work, payload
    deadline = time.monotonic() + 5
    while reference() is not None and time.monotonic() < deadline:
        time.sleep(1e-3)  # a helper lets go a moment after its last chunk
    assert reference() is None


# ------------------------------------------------------------------- chunks run natively

_LOOP = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64),
                         ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p)


def _native_chunks(count, loop):
    """``count`` chunks of the loop function ``loop`` (a ctypes callback): chunk ``i``'s
    one argument pointer is ``1000 + i``, its dimensions ``(1, i)``."""
    callback = _LOOP(loop)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    args = np.arange(1000, 1000 + count, dtype=np.int64)
    dims = np.stack([np.ones(count, np.int64), np.arange(count, dtype=np.int64)], axis=1)
    words = np.concatenate([args, dims.ravel(), np.zeros(1, np.int64)])
    return threads.NativeChunks(address, words, count, 1, callback)


@pytest.fixture
def native_crew():
    if not threads.native_runs():
        pytest.skip("chunks do not run natively on this machine")
    return threads._helpers()


def test_native_chunks_run_once_each_on_several_threads(native_crew):
    seen: list[tuple[int, int, int, str]] = []
    barrier = threading.Barrier(2, timeout=5)

    def loop(args, dims, _steps, _data):
        argument = ctypes.cast(args, ctypes.POINTER(ctypes.c_int64))[0]
        if argument < 1002:
            barrier.wait()  # the first two chunks are in flight at once
        seen.append((argument, dims[0], dims[1], threading.current_thread().name))

    for _ in range(3):
        seen.clear()
        barrier.reset()
        time.sleep(20 * threads.SPIN_SECONDS)  # the helpers stop spinning and sleep
        assert not spinning.flag_names(native_crew.run_native(_native_chunks(12, loop), 2))
        assert sorted(item[:3] for item in seen) == [(1000 + i, 1, i) for i in range(12)]
        assert len({item[3] for item in seen}) == 2


def test_native_chunks_report_the_flags_a_helper_raised(native_crew):
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.log.restype, libm.log.argtypes = ctypes.c_double, [ctypes.c_double]
    barrier = threading.Barrier(2, timeout=5)

    def loop(args, _dims, _steps, _data):
        if ctypes.cast(args, ctypes.POINTER(ctypes.c_int64))[0] < 1002:
            barrier.wait()
        if threading.current_thread() is not threading.main_thread():
            libm.log(0.0)  # raises "divide by zero" on the helper only
        libm.log(1.0)

    flags = native_crew.run_native(_native_chunks(4, loop), 2)
    assert spinning.flag_names(flags) == {"divide by zero"}
    assert not spinning.flag_names(
        native_crew.run_native(_native_chunks(4, lambda *_: libm.log(1.0)), 1))


def test_native_chunks_report_the_overflow_the_c_library_raises(native_crew):
    """Found by a conformance hunt: ``feraiseexcept(FE_OVERFLOW)`` (a kernel's report of
    ``MIN // -1``) raises the x87 flag, which the runner did not read: split calls lost
    "overflow"."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    overflow = {"x86_64": 8, "amd64": 8}.get(platform.machine().lower())
    if overflow is None:
        pytest.skip("FE_OVERFLOW's value is known for x86-64 only here")
    flags = native_crew.run_native(
        _native_chunks(4, lambda *_: libm.feraiseexcept(overflow)), 2)
    assert spinning.flag_names(flags) == {"overflow"}
    assert not spinning.flag_names(native_crew.run_native(_native_chunks(4, lambda *_: 0), 2))


def test_a_native_call_finding_the_crew_busy_runs_its_chunks_alone(native_crew):
    names: list[str] = []
    chunks = _native_chunks(5, lambda *_: names.append(threading.current_thread().name))
    with native_crew.busy:
        assert not spinning.flag_names(native_crew.run_native(chunks, 2))
    assert names == [threading.current_thread().name] * 5


def test_a_flag_raised_in_any_chunk_of_a_native_split_is_reported():
    x = np.ones(600_000)
    x[::1000] = 0.0  # every chunk divides by zero, whichever thread runs it
    inverse = numfuse.jit(lambda x: 1.0 / x, threads=2)
    with np.errstate(divide="ignore"):
        inverse(x)  # measured on one thread
    for _ in range(5):
        with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide"):
            inverse(x)
    with np.errstate(divide="ignore", invalid="raise"):
        inverse(np.abs(x) + 1.0)  # the flags of the last call are not carried over


def _loop_function(fn, *args):
    compiled = numfuse.compile(fn, *args, threads=2)
    runner = compiled.program.runners[0]
    loop = runner.calls.loop
    if loop is None:
        pytest.skip("no loop function to call natively")
    return loop


def test_the_loop_function_takes_plain_operands_and_numpy_takes_the_rest():
    x = np.arange(8.0)
    loop = _loop_function(lambda x, mu: (x - mu, x * mu), x, 0.5)
    assert loop.ranks == (1, 0, 1, 1) and loop.first_output == 2
    a, b = np.empty(8), np.empty(8)
    found = loop.operands([x, 0.5, a, b], (), 8)
    assert found is not None
    arrays, addresses, outer, core = found
    assert addresses[0] == x.ctypes.data and outer == [0, 0, 0, 0] and core == [8, 0, 8, 8]
    assert arrays[1].shape == () and arrays[1] == 0.5
    assert loop.operands([x, 0.5, x, b], (), 8) is not None  # written in place: numpy's too
    buffer = np.arange(16.0)
    assert loop.operands([buffer[:8], 0.5, buffer[8:], b], (), 8) is not None  # adjacent
    refused = {
        "a float32 operand numpy would cast": [x.astype(np.float32), 0.5, a, b],
        "an int scalar numpy would cast": [x, 1, a, b],
        "a core axis of another length": [x[:4], 0.5, a[:4], b],
        "an output overlapping an input": [x, 0.5, x[::-1], b],
        "an output overlapping another": [x, 0.5, a, a],
        "an output overlapping part of an input": [buffer[:8], 0.5, buffer[4:12], b],
        "an output overlapping part of another": [x, 0.5, buffer[:8], buffer[7:15]],
        "a strided output": [x, 0.5, np.empty(16)[::2], b],
        "a read-only output": [x, 0.5, np.broadcast_to(a, (8,)), b],
        "an unaligned operand": [np.frombuffer(bytes(65), np.float64, 8, 1), 0.5, a, b],
        "a missing output": [x, 0.5, None, b],
    }
    for why, values in refused.items():
        assert loop.operands(values, (), 8) is None, why
    rows = np.ones((3, 8))
    assert loop.operands([rows, 0.5, np.empty((3, 8)), np.empty((3, 8))], (3,), 8)[2] == \
        [64, 0, 64, 64]
    assert loop.operands([x, 0.5, np.empty((3, 8)), np.empty((3, 8))], (3,), 8)[2] == \
        [0, 0, 64, 64]  # an input broadcast along the rows
    assert loop.operands([rows, 0.5, a, np.empty((3, 8))], (3,), 8) is None
    assert loop.operands([np.ones((2, 3, 8)), 0.5, a, b], (2, 3), 8) is None


def test_kernels_checked_in_python_after_their_call_have_no_loop_function():
    x = np.full(10, 2, dtype=np.int64)
    compiled = numfuse.compile(lambda x: np.int64(3) ** (x + 0), x, threads=2)
    assert compiled.program.runners[0].calls.loop is None


def test_a_native_split_into_an_overlapping_out_gives_numpys_result(chunk_calls):
    def shifted(x):
        return x * 2.0 + 1.0

    data = RNG.standard_normal(600_001)
    expected = data.copy()
    np.add(np.multiply(data[:-1], 2.0), 1.0, out=expected[1:])
    jitted = numfuse.jit(shifted, threads=2)
    jitted(data[:-1].copy())
    jitted(data[:-1], out=data[1:])
    assert chunk_calls
    assert_same(data, expected)


def _split_in_child(queue):
    work, done, names = _two_threads_meet(4)
    threads.run_chunks(work, 4, 2)
    native: list[str] = []
    if threads.native_runs():
        barrier = threading.Barrier(2, timeout=5)

        def loop(args, _dims, _steps, _data):
            if ctypes.cast(args, ctypes.POINTER(ctypes.c_int64))[0] < 1002:
                barrier.wait()
            native.append(threading.current_thread().name)

        threads.run_native(_native_chunks(6, loop), 2)
    queue.put((sorted(done), len(names), len(native) in (0, 6) and len(set(native)) != 1))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_its_own_helpers():
    threads.run_chunks(lambda index: None, 4, 2)  # the parent's helpers exist
    if threads.native_runs():
        threads.run_native(_native_chunks(4, lambda *_: None), 2)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_split_in_child, args=(queue,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == ([0, 1, 2, 3], 2, True)


def _runs(flags):
    """The lengths of the runs of consecutive True in ``flags``."""
    runs, length = [], 0
    for flag in [*flags, False]:
        if flag:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    return runs


def test_splitting_stops_while_it_does_not_pay_and_is_retried(chunk_calls, monkeypatch):
    """While splits do not pay, a retry is RETRY_SPLITS splits in a row (the first wakes
    the helpers) about once in ``retry`` calls, at no fixed period.  (A split slowed by
    another process ends its retry early: not here, where the schedule is tested.)"""
    monkeypatch.setattr(threads, "RETRY_GIVES_UP", 0.0)
    monkeypatch.setattr(threads, "IMPOSSIBLE_GAIN", math.inf)
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    compiled(x, 0.25)
    (known,) = compiled.program.runners[0].calls.classes.values()
    flags = []
    for _ in range(8 * threads.RETRY_EVERY):
        count = len(chunk_calls)
        known.gain, known.retry = 1.0, threads.RETRY_EVERY  # splits were no faster
        assert_same(compiled(x, 0.25)[:2], logp_and_sums(x, 0.25)[:2])
        flags.append(len(chunk_calls) > count)
    runs = _runs(flags)
    assert set(runs) <= {threads.RETRY_SPLITS}  # (a run cut by the window's end aside)
    assert 8 - 3 <= len(runs) <= 8 + 1
    gaps = [index for index, flag in enumerate(flags) if flag and not (index and flags[index - 1])]
    assert len({later - earlier for earlier, later in itertools.pairwise(gaps)}) > 1


def test_exploring_calls_are_spread_over_every_position_of_a_batch():
    """One call in ``every`` explores, at positions that are no fixed period: calls made in
    batches of 8 explore at every position of a batch."""
    for every in (16, 32):
        chosen = [count for count in range(64 * every) if threads.explores(count, every)]
        assert abs(len(chosen) - 64) <= 2
        assert {count % 8 for count in chosen} == set(range(8))


def _split_for(seconds: float, threads: int) -> None:
    """A stand-in for a split call (``ThreadPolicy._split``) taking ``seconds``."""
    time.sleep(seconds)


def test_a_slow_split_among_fast_ones_does_not_stop_splitting_but_slow_ones_do():
    known = threads.SizeClass(1e-9)
    expected = 0.02  # seconds on one thread

    def split(seconds):
        threads.ThreadPolicy._timed_split(known, expected, 2, _split_for, seconds)

    split(0.013)  # about 1.5x faster than one thread
    split(0.05)  # slowed once (a page fault, another process for a moment)
    assert known.gain >= threads.MIN_GAIN
    for _ in range(threads.GAIN_WINDOW - 1):
        split(0.05)  # the other core is busy: every split is slow
    assert known.gain < threads.MIN_GAIN
    split(0.013)  # a retry finds the machine free again
    assert known.gain >= threads.MIN_GAIN and known.retry == threads.RETRY_EVERY


def test_a_retry_is_judged_by_its_best_split_the_first_waking_the_helpers():
    """A retry's first split wakes helpers asleep since the last split (slow on a VM):
    the retry is RETRY_SPLITS splits, no doubt raised and no back-off before the last,
    and splitting resumes when a later one pays."""
    expected = 0.02  # seconds on one thread
    known = threads.SizeClass(expected / 1000)
    known.measured, known.gain, known.recent = True, 1.0, [1.0]
    known.retry = 4 * threads.RETRY_EVERY
    seconds = [0.03] + [0.012] * (threads.RETRY_SPLITS - 1)  # waking, then awake
    known.trials = threads.RETRY_SPLITS - 1  # as ``_large`` starts a retry
    for index, slept in enumerate(seconds):
        if index:
            known.trials -= 1
        threads.ThreadPolicy._timed_split(known, expected, 2, _split_for, slept)
        if index == 0:
            assert known.doubt is None and known.retry == 4 * threads.RETRY_EVERY
    assert known.gain >= threads.MIN_GAIN and known.retry == threads.RETRY_EVERY

    known = threads.SizeClass(expected / 1000)
    known.measured, known.gain, known.recent = True, 1.0, [1.0]
    known.trials = threads.RETRY_SPLITS - 1
    for index in range(threads.RETRY_SPLITS):  # every split slow: the other core is busy
        if index:
            known.trials -= 1
        threads.ThreadPolicy._timed_split(known, expected, 2, _split_for, 0.03)
    assert known.gain < threads.MIN_GAIN and known.doubt is not None
    assert known.retry == 2 * threads.RETRY_EVERY  # backed off once, for the whole retry

    known = threads.SizeClass(expected / 1000)
    known.measured, known.gain, known.recent = True, 1.0, [1.0]
    known.trials = threads.RETRY_SPLITS - 1
    threads.ThreadPolicy._timed_split(known, expected, 2, _split_for,
                                      expected / threads.RETRY_GIVES_UP * 1.5)
    assert known.trials == 0 and known.doubt is not None  # far too slow: the retry ends


def test_splits_slowed_with_everything_else_are_judged_against_a_call_as_slow():
    """After a pause every call is slow for a while: splits slowed so are judged against
    the next single-threaded call, not against the fastest call ever made, and go on
    when they beat it; splits slowed by a busy core stay stopped."""
    expected = 0.02  # seconds on one thread, at full speed

    def slowed_splits(seconds):
        known = threads.SizeClass(expected / 1000)
        known.measured = True
        for _ in range(threads.GAIN_WINDOW):
            threads.ThreadPolicy._timed_split(known, expected, 2, _split_for, seconds)
        return known

    known = slowed_splits(0.025)  # slower than the estimate: not paying, in doubt
    assert known.gain < threads.MIN_GAIN and known.doubt is not None
    known.confirm(0.04 / 1000)  # one thread, now, takes twice its best
    assert known.gain >= threads.MIN_GAIN and known.doubt is None
    assert known.retry == threads.RETRY_EVERY and len(known.recent) == 1

    # on probation: a split slower than the call that restored splitting stops it
    assert not known.judged(0.05, 1000) and known.gain < threads.MIN_GAIN
    known = slowed_splits(0.025)
    known.confirm(0.04 / 1000)
    assert known.judged(0.02, 1000) and known.gain >= threads.MIN_GAIN
    assert known.judged(0.5, 1000)  # (judged once only)

    known = slowed_splits(0.025)
    known.confirm(0.021 / 1000)  # one thread is as fast as ever: the splits do not pay
    assert known.gain < threads.MIN_GAIN and known.doubt is None
    known.confirm(0.04 / 1000)  # no doubt left: a later slow call changes nothing
    assert known.gain < threads.MIN_GAIN


def test_a_single_threaded_call_after_splits_that_stopped_paying_decides(chunk_calls):
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    compiled(x, 0.25)  # measures
    (known,) = compiled.program.runners[0].calls.classes.values()
    known.gain, known.recent = 1.0, [1.0]
    known.doubt = known.cost / 100  # as if the last splits had been 100x faster than now
    compiled(x, 0.25)  # not paying: one thread, which confirms or clears the doubt
    assert chunk_calls == [] and known.doubt is None and known.gain >= threads.MIN_GAIN
    compiled(x, 0.25)
    assert len(chunk_calls) == 1


def test_while_splitting_pays_one_call_in_retry_every_measures_on_one_thread(chunk_calls,
                                                                            monkeypatch):
    # a split much faster than its first, cold, single-threaded measurement makes the
    # class measure again (tested below): not the rule under test here
    monkeypatch.setattr(threads, "IMPOSSIBLE_GAIN", math.inf)
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    compiled(x, 0.25)  # measures
    (known,) = compiled.program.runners[0].calls.classes.values()
    calls = 8 * threads.RETRY_EVERY
    for _ in range(calls):
        known.gain = 2.0  # as if splits kept paying
        compiled(x, 0.25)
    single = calls - len(chunk_calls)
    assert 8 - 2 <= single <= 8 + 2


def test_a_cost_learnt_at_one_size_does_not_decide_at_another(chunk_calls):
    large, medium = RNG.standard_normal(1_200_000), RNG.standard_normal(300_000)
    compiled = numfuse.compile(logp_and_sums, large, 0.25, threads=2)
    compiled(large, 0.25)
    policy = compiled.program.runners[0].calls
    (known,) = policy.classes.values()
    known.cost *= 100  # as if the large calls had been slowed (page faults, a busy core)
    compiled(large, 0.25)
    assert len(chunk_calls) == 1
    policy.small = 1  # every call below takes the policy's decision, however fast the machine
    # A call of another size class runs on one thread first, measuring its own cost, so
    # the inflated estimate of the large calls does not make it split.
    assert_same(compiled(medium, 0.25)[:2], logp_and_sums(medium, 0.25)[:2])
    assert len(chunk_calls) == 1 and len(policy.classes) == 2
    assert policy.size_class(medium.size).measured
    assert policy.size_class(medium.size).cost < known.cost / 10


def test_a_call_too_short_to_split_is_neither_timed_nor_judged(chunk_calls):
    """Once its class is measured, a call whose expected time is below the split threshold
    runs at once: no clock, no decision (bench_threads: sum_squares at 1e6, 120 µs,
    ran 0.93-0.95x its threads=1 copy for that bookkeeping alone)."""
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    compiled(x, 0.25)  # measures
    (known,) = compiled.program.runners[0].calls.classes.values()
    known.cost = threads.PARALLEL_MIN_SECONDS / x.size / 10  # as if ten times too fast
    known.doubt = known.cost / 100  # a single-threaded call would confirm or clear this
    result, expected = compiled(x, 0.25), logp_and_sums(x, 0.25)
    assert chunk_calls == [] and known.doubt == known.cost / 100
    assert_same(result[:2], expected[:2])


def test_split_plan_cuts_a_long_core_axis_else_the_rows():
    along_core, bounds = threads.split_plan(100_000, (3,), 4)
    assert along_core and bounds[0] == 0 and bounds[-1] == 100_000 and len(bounds) == 5
    assert all(bound % 64 == 0 for bound in bounds[:-1]) and bounds == sorted(bounds)
    assert threads.split_plan(50, (20_000,), 4) == (False, [0, 5000, 10000, 15000, 20000])
    assert threads.split_plan(50, (1, 20_000), 4) is None  # nothing long enough to cut


def test_a_runner_without_the_thread_policy_never_splits(chunk_calls):
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    program = compiled.program
    in_caller_thread = [LocalRunner(step) for step in program.steps]
    for _ in range(3):
        result = program((x, 0.25), runners=in_caller_thread)
    assert chunk_calls == []
    compiled(x, 0.25)
    split = compiled(x, 0.25)  # the program's own runner splits it
    assert chunk_calls
    assert_same(split[:2], result[:2])
    assert_same(split[2], result[2], rtol=1e-12)  # a float sum of chunks: another order
    assert_same(split[3:], result[3:])


def standardise_columns(x):
    return (x - x.mean(axis=0)) / x.std(axis=0), x.std(axis=0, keepdims=True)


@pytest.mark.parametrize("shape", [(300, 1000), (2, 40, 2000), (6, 3000, 4)])
def test_a_kernel_of_passes_is_split_along_its_columns_or_outer_axis_only(chunk_calls,
                                                                          shape):
    """A kernel that accumulates across rows is cut along its columns (or its outer
    axis), never its rows: every column still adds its rows in numpy's order, so the
    result is numpy's bit for bit however the call is cut."""
    x = RNG.standard_normal(shape)
    axis = 1 if len(shape) == 3 and shape[2] == 4 else (len(shape) - 2)

    def fn(x):
        mean = x.mean(axis=axis, keepdims=True)
        return (x - mean) / x.std(axis=axis, keepdims=True), (x * 2).sum(axis=axis)

    jitted = numfuse.jit(fn, threads=2)
    jitted(x)  # measures the kernel
    result = jitted(x)
    assert chunk_calls and chunk_calls[0] >= 2
    assert_same(result, fn(x))


def test_split_plan_of_a_kernel_of_passes_counts_its_rows():
    along_core, bounds = threads.split_plan(1000, (), 8, depth=1000)
    assert along_core and bounds[-1] == 1000 and all(b % 64 == 0 for b in bounds[:-1])
    assert all(stop - start >= threads.MIN_PASS_COLUMNS // 2
               for start, stop in itertools.pairwise(bounds))
    assert len(bounds) - 1 == 1000 // threads.MIN_PASS_COLUMNS  # wide chunks only
    assert threads.split_plan(1000, (), 8, depth=1) is None  # too little work per chunk
    # too few columns for two chunks of 64: the outer axis is cut
    assert threads.split_plan(100, (5,), 4, depth=10_000) == (False, [0, 1, 2, 4, 5])


def test_the_single_thread_cost_is_the_least_measured_not_a_mean(chunk_calls):
    """A slow single-threaded call (first touch of memory, a busy core) must not keep the
    estimate high: a split is then judged against what one thread really does."""
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    compiled(x, 0.25)
    (known,) = compiled.program.runners[0].calls.classes.values()
    measured = known.cost
    known.cost, known.gain = measured * 100, 1.0  # as if measured while slowed; not paying
    compiled(x, 0.25)  # runs on one thread and measures again
    assert known.cost < measured * 10


def test_a_split_faster_than_its_threads_can_be_measures_the_cost_again(chunk_calls):
    """A first call slowed by faulting in its memory leaves an estimate no thread count
    can beat fairly: the split that 'gains' beyond its threads makes the next call run on
    one thread and measure again, instead of splitting calls one thread runs faster."""
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    compiled(x, 0.25)
    (known,) = compiled.program.runners[0].calls.classes.values()
    measured = known.cost
    known.cost = measured * 100  # as if the first call had been slowed 100-fold; paying
    compiled(x, 0.25)
    assert len(chunk_calls) == 1 and not known.measured
    result, expected = compiled(x, 0.25), logp_and_sums(x, 0.25)  # one thread, measuring
    assert_same(result[:2], expected[:2])
    assert_same(result[2], expected[2], rtol=1e-12)  # chunks' partials, added in order
    assert_same(result[3:], expected[3:])
    assert len(chunk_calls) == 1 and known.measured and known.cost < measured * 10


def test_measuring_again_never_raises_the_estimate(chunk_calls):
    """A measurement asked for by an impossible gain only lowers the estimate: a slowed
    one (a cold call) would raise it, and every split would look impossible again."""
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    compiled(x, 0.25)
    (known,) = compiled.program.runners[0].calls.classes.values()
    low = known.cost / 10  # as if one call had run ten times as fast
    known.cost, known.measured = low, False
    compiled(x, 0.25)  # one thread, measuring: slower than that
    assert known.measured and known.cost == low


# ------------------------------------------- fused reductions: the same bits on any thread count

CHUNK, FROM = threads.REDUCTION_CHUNK, threads.CHUNKED_FROM


@pytest.fixture
def always_split(monkeypatch, chunk_calls):
    """Every call takes the policy's decision and splits once measured, however fast the
    machine: a call of ``threads=2`` really runs on two threads."""
    monkeypatch.setattr(threads, "PARALLEL_MIN_SECONDS", 0.0)
    monkeypatch.setattr(threads, "CHUNKED_SECONDS", 0.0)  # every kernel chunks from FROM
    return chunk_calls


REDUCERS = {
    "sum": lambda x: np.sum((x - x.dtype.type(1)) * x),
    "prod": lambda x: np.prod(x * x.dtype.type(1)),
    "max": lambda x: np.max(x * 2),
    "min": lambda x: np.min(x - 1),
    "mean": lambda x: np.mean(x * 3),
    "var": lambda x: np.var(x + 1),
    "rows": lambda x: (x * 2).reshape(2, -1).sum(axis=-1),
}


def _values(dtype: str, size: int) -> np.ndarray:
    rng = np.random.default_rng(size)
    if dtype.startswith("complex"):
        values = rng.standard_normal(size) + 1j * rng.standard_normal(size)
        return (values / 64 + 1).astype(dtype)
    if dtype.startswith("int"):
        return rng.integers(-3, 4, size).astype(dtype)
    return (rng.standard_normal(size) / 4096 + 1).astype(dtype)  # products stay finite


def _thread_counts_agree(fn, x, chunk_calls, split: bool = True) -> None:
    """``fn`` jitted with threads=1, 2 and the default gives the same bits (and numpy's
    values within rounding); the threads=2 call was split when ``split``."""
    results = []
    for count in (1, 2, None):
        jitted = numfuse.jit(fn, threads=count)
        before = len(chunk_calls)
        for _ in range(3):  # the first large call measures, the next ones split
            result = jitted(x)
        if count == 2 and split:
            assert len(chunk_calls) > before, "the threads=2 calls were not split"
        results.append(np.asarray(result))
    assert all(result.dtype == results[0].dtype for result in results)
    assert all(result.tobytes() == results[0].tobytes() for result in results), results
    expected = np.asarray(fn(x))
    assert results[0].dtype == expected.dtype
    float32 = expected.dtype in (np.float32, np.complex64)
    np.testing.assert_allclose(results[0], expected, rtol=1e-3 if float32 else 1e-9)


SIZES = (FROM - 2, FROM, FROM + 2, FROM + CHUNK + 34)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "complex128"])
@pytest.mark.parametrize("reducer", sorted(REDUCERS))
def test_fused_reductions_give_the_same_bits_on_any_thread_count(always_split, reducer,
                                                                 dtype, size):
    if dtype.startswith("complex") and reducer in ("max", "min"):
        pytest.skip("complex max/min run as numpy calls")
    _thread_counts_agree(REDUCERS[reducer], _values(dtype, size), always_split,
                         split=size >= FROM and not _in_order(reducer, dtype))


def _in_order(reducer: str, dtype: str) -> bool:
    """A float product: multiplied in numpy's order, never cut (numpy's bits)."""
    return reducer == "prod" and dtype.startswith("float")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_long_float_product_is_numpys_product_in_order(dtype):
    x = _values(dtype, FROM + CHUNK + 34)
    for count in (1, 2, None):
        jitted = numfuse.jit(REDUCERS["prod"], threads=count)
        for _ in range(3):
            assert np.asarray(jitted(x)).tobytes() == np.asarray(REDUCERS["prod"](x)).tobytes()


@pytest.mark.slow
@pytest.mark.parametrize("size", [FROM - 1, FROM, FROM + 1, FROM + CHUNK - 1,
                                  FROM + CHUNK + 1, 40 * CHUNK + 2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "complex64",
                                   "complex128"])
@pytest.mark.parametrize("reducer", sorted(REDUCERS))
def test_fused_reductions_give_the_same_bits_on_any_thread_count_exhaustive(
        always_split, reducer, dtype, size):
    if dtype.startswith("complex") and reducer in ("max", "min"):
        pytest.skip("complex max/min run as numpy calls")
    if size % 2:
        size += 1  # the "rows" reducer halves it
    # a shorter row is never cut (its partial would depend on the cut), nor a float
    # product's
    _thread_counts_agree(REDUCERS[reducer], _values(dtype, size), always_split,
                         split=size >= FROM and not _in_order(reducer, dtype))


@pytest.mark.parametrize("place", [0, CHUNK - 1, CHUNK, FROM + 5])
@pytest.mark.parametrize("reducer", ["max", "min"])
def test_max_and_min_propagate_a_nan_from_any_chunk(always_split, reducer, place):
    x = _values("float64", FROM + 6)
    x[place] = np.nan
    _thread_counts_agree(REDUCERS[reducer], x, always_split)
    assert np.isnan(numfuse.jit(REDUCERS[reducer], threads=2)(x))


def test_reductions_along_long_rows_of_a_matrix_agree(always_split):
    """Rows of a matrix longer than a chunk: each row is chunked the same way."""
    x = _values("float64", 3 * (FROM + CHUNK + 7)).reshape(3, -1)

    def fn(x):
        y = x * 2
        return y, y.sum(axis=-1), np.max(y, axis=1, keepdims=True), y.sum()

    results = [numfuse.jit(fn, threads=count) for count in (1, 2)]
    for jitted in results:
        jitted(x)
    one, two = (jitted(x) for jitted in results)
    assert always_split
    for left, right in zip(one, two, strict=True):
        assert np.asarray(left).tobytes() == np.asarray(right).tobytes()
    assert_same(one, fn(x), rtol=1e-12)


def test_a_chunked_reduction_reports_each_flag_once(always_split):
    """Zeros in several chunks: one 'divide by zero' warning, as numpy gives, on one
    thread or two; under errstate raise, numpy's FloatingPointError."""
    from conftest import observe

    x = _values("float64", FROM + 3)
    x[[5, CHUNK + 1, FROM + 2]] = 0.0

    def fn(x):
        return np.sum(1.0 / x), np.max(np.sqrt(x - 1.0))

    expected, expected_warnings = observe(fn, x)
    for count in (1, 2):
        jitted = numfuse.jit(fn, threads=count)
        for _ in range(3):
            result, warned = observe(jitted, x)
            assert warned == expected_warnings
        assert_same(result, expected)
        raised, _ = observe(jitted, x, all="raise")
        assert isinstance(raised, FloatingPointError) and "divide by zero" in str(raised)
        assert observe(jitted, x, all="ignore")[1] == []
    assert always_split


def test_report_flags_follows_the_errstate_modes(capsys):
    name = "kernel_x"
    with pytest.warns(RuntimeWarning, match="overflow encountered in kernel_x"):
        threads.report_flags({"overflow"}, name)
    with np.errstate(divide="warn", invalid="raise"), \
            pytest.warns(RuntimeWarning, match="divide by zero"), \
            pytest.raises(FloatingPointError, match="invalid value encountered in kernel_x"):
        threads.report_flags({"invalid value", "divide by zero"}, name)
    calls = []
    with np.errstate(all="call", call=lambda kind, status: calls.append((kind, status))):
        threads.report_flags({"invalid value", "divide by zero"}, name)
    assert calls == [("divide by zero", 9), ("invalid value", 9)]  # numpy's order and status
    with np.errstate(under="print"):
        threads.report_flags({"underflow"}, name)
    assert capsys.readouterr().err == "Warning: underflow encountered in kernel_x\n"
    with np.errstate(all="ignore"):
        threads.report_flags({"overflow", "invalid value"}, name)


def _counted_calls(monkeypatch, compiled) -> list[tuple[int, ...]]:
    """The shapes of the first operand of each call of ``compiled``'s one gufunc, from now on."""
    step = compiled.program.steps[0]
    calls: list[tuple[int, ...]] = []
    original = step.ufunc

    def counting(*operands, **options):
        calls.append(np.shape(operands[0]))
        return original(*operands, **options)

    monkeypatch.setattr(step, "ufunc", counting)
    return calls


def test_a_chunked_call_is_one_gufunc_call_per_range_of_chunks(monkeypatch):
    """Chunking does not cost a call per chunk: one for the whole chunks, one for the
    shorter last chunk."""
    x = _values("float64", 10 * CHUNK + 5)
    compiled = numfuse.compile(REDUCERS["sum"], x, threads=1)
    calls = _counted_calls(monkeypatch, compiled)
    result = compiled(x)
    assert calls == [(10, CHUNK), (1, 5)]
    assert np.isclose(result, REDUCERS["sum"](x), rtol=1e-12)


def test_a_reduction_along_rows_too_short_to_chunk_is_never_cut_along_them():
    assert threads.split_plan(FROM - 1, (), 8, cut_core=False) is None
    assert threads.split_plan(FROM - 1, (40,), 4, cut_core=False) == (False, [0, 10, 20, 30, 40])


def test_a_row_shorter_than_chunked_from_is_one_call(monkeypatch, always_split):
    """No chunking below ``CHUNKED_FROM``: one gufunc call, never split."""
    x = _values("float64", FROM - 2)
    compiled = numfuse.compile(REDUCERS["sum"], x, threads=2)
    compiled(x)
    calls = _counted_calls(monkeypatch, compiled)
    compiled(x)
    assert calls == [(FROM - 2,)] and not always_split


def test_where_rows_are_chunked_depends_on_the_kernels_operations_only():
    """Costly work is chunked (and so may be split) from shorter rows than cheap work,
    never below ``CHUNKED_FROM``: a rule of the kernel and the size, not of timings."""
    x = _values("float64", 1000)
    cheap = numfuse.compile(lambda x: np.sum(x * 2), x, threads=2)
    costly = numfuse.compile(lambda x: np.sum(np.exp(x) * np.log(x)), x, threads=2)
    cheap_from, costly_from = (compiled.program.runners[0].calls.chunk_from
                               for compiled in (cheap, costly))
    assert FROM == costly_from < cheap_from
    policy = cheap.program.runners[0].calls
    assert policy.small <= cheap_from  # a row to chunk always reaches the policy


def test_retries_of_a_split_that_does_not_pay_back_off():
    retry = threads.RETRY_EVERY
    for _ in range(20):
        retry = threads.next_retry(retry, threads.MIN_GAIN / 2)
    assert retry == threads.MAX_RETRY_EVERY
    assert threads.next_retry(retry, threads.MIN_GAIN) == threads.RETRY_EVERY


def test_a_class_retries_as_far_apart_as_its_retry_says(chunk_calls):
    x = RNG.standard_normal(600_000)
    compiled = numfuse.compile(logp_and_sums, x, 0.25, threads=2)
    compiled(x, 0.25)
    (known,) = compiled.program.runners[0].calls.classes.values()
    retry = 4 * threads.RETRY_EVERY
    flags = []
    for _ in range(8 * retry):
        count = len(chunk_calls)
        known.gain, known.retry = 1.0, retry  # not paying
        compiled(x, 0.25)
        flags.append(len(chunk_calls) > count)
    assert 8 - 3 <= len(_runs(flags)) <= 8 + 1


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_a_thread_count_that_is_no_positive_int_is_refused(threads):
    with pytest.raises(ValueError, match="positive int"):
        numfuse.jit(lambda x: x + 1, threads=threads)
    with pytest.raises(ValueError, match="positive int"):
        numfuse.compile(lambda x: x + 1, np.ones(3), threads=threads)
