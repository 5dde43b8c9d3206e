"""Running one kernel call on several threads, and deciding when that pays.

numpy releases the GIL while a gufunc loop runs, so a large call can be cut into chunks
that threads run at the same time (numba's ``target="parallel"`` gufuncs were slower than
single-threaded ones on 2 cores).  Chunks are handed out one at a time from a shared
counter — the calling thread takes part — so a thread slowed by a busy core simply takes
fewer chunks instead of making everyone wait at a static split.  Every chunk's operands
are sliced before the threads start, so a thread holds the GIL only for its gufunc calls.

Where ``spinning`` runs tasks natively (x86-64 Linux) and numpy would only call the loop
(``LoopFunction.operands``: no cast, copy, overlap or error to handle), a chunk is not a
gufunc call but one call of the kernel's loop function on pointers into the operands
(``NativeChunks``), claimed and run by the threads without the GIL: a gufunc call from a
Python thread takes the GIL before and after its loop, and a thread finding it taken
sleeps and is woken slowly (logp/grad at 1e6 split six ways: 267 µs for the chunks as
gufunc calls, 250-290 µs for the whole call natively).

The helper threads (``_Crew``) wait for work without sleeping for a while: waking a
sleeping thread costs 20-40 µs on the virtual machines measured, paid twice per split
call (the helpers' start, the caller's wait for the last chunk), and the GIL handed to a
thread that sleeps for it costs as much again.  After its chunks a helper spins, the GIL
released (``spinning``), ``SPIN_SECONDS`` for the next split call (calls made back to
back find it awake), then sleeps; the caller waits for the helpers' last chunks spinning
too, then sleeping.  Measured at 1e5 elements: a softplus/sigmoid call split over two
threads took 366-459 µs with sleeping helpers, 283-367 µs with spinning ones (470 µs on
one thread).

How many threads: the ``threads=`` option of ``jit``/``compile`` when given; otherwise
numba's setting (``numba.set_num_threads`` / ``NUMBA_NUM_THREADS``) when called from the
main thread, and one thread when called from any other thread (a thread pool, a dask
worker), so nested parallelism never oversubscribes the cores.

When: each kernel measures its cost per element on its own single-threaded calls, per
size class (calls within a factor of two of each other: a call of a million elements
costs more per element than one of a hundred thousand — its fresh output pages are
faulted in, its operands do not stay in cache — so the cost learnt at one size must not
decide at another); the first large call of each class runs on one thread. A call is
split only when its expected time is well above the cost of handing out chunks, and
only while splitting pays in its class: each split call compares its time with the
class's single-threaded estimate, and when the gain falls below ``MIN_GAIN`` the next
call runs on one thread and the splits are judged against it instead — a call made under
the same conditions: after a pause every call is slow for some milliseconds (measured on
a memory-bound logp/grad at 1e6: the first of eight calls 2x the last, split or not), and
the estimate is the fastest call ever made.  When that confirms it (the other cores are
busy) the class stays on one thread, retrying about once in ``RETRY_EVERY`` large
calls in case the machine has become free — twice as far apart after each retry that did
not pay, up to ``MAX_RETRY_EVERY`` (on a saturated machine a split call can take several
times the single-thread time, as a helper thread holding a chunk waits for a core:
retries every 16 calls cost 0.7-0.8x there).  A retry is ``RETRY_SPLITS`` split calls
in a row, judged by the best: the first wakes helpers asleep since the last split (a
split slower than ``RETRY_GIVES_UP`` times the estimate ends it: a busy core).
While splitting pays, about one call in ``RETRY_EVERY`` runs on one thread to keep the
estimate current.  Which calls explore is spread by the golden ratio (``explores``), not
a fixed period: calls made in batches (8 at a time among other work, as a benchmark
does) would otherwise explore at one position of each batch — always the first, slow
call after the others ran —, and a class could stop splitting for good (logp/grad at
1e6 in such batches: 5-104 calls of 240 split before, 192-299 of 320 after).

Fused reductions: a kernel folding a reduction along rows of at least ``chunk_from``
elements (a length fixed per kernel) always runs them as chunks of ``REDUCTION_CHUNK``
elements (the last one shorter), one partial per chunk, combined in chunk order
afterwards — on one thread or several; shorter rows are never cut, nor are the rows of a
float product (numpy multiplies in order, and so does its kernel).  The chunks depend on
the row length alone, so a result does not depend on the thread count, nor on whether a
call was split: ``threads=1`` and the default give the same bits.  One gufunc call
covers a whole range of chunks (its rows, reshaped), so chunking costs one extra call
for the shorter last chunk, not one per chunk.

Floating-point flags raised by the several gufunc calls of a chunked call are collected
and reported once after them, under the caller's ``np.errstate`` (``FlagsReportedOnce``),
as numpy reports them for one call.

``ThreadPolicy`` applies this policy to the gufunc calls of one kernel step of a program
(the calls of its ``runtime.LocalRunner``); ``run_chunks`` runs the chunks.
"""

from __future__ import annotations

import contextvars
import itertools
import math
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import spinning
from .codegen import BLOCK
from .ops import OPS

if TYPE_CHECKING:
    from .graph import Node
    from .reductions import Reduction
    from .runtime import KernelStep, Settings

# A split pays when the call would take this long on one thread (chunk hand-out and the
# extra gufunc calls cost some tens of microseconds).
PARALLEL_MIN_SECONDS = 200e-6
# Aim for chunks of about this much work, and at most this many chunks per thread.
CHUNK_SECONDS = 100e-6
CHUNKS_PER_THREAD = 4
MIN_CHUNK_ELEMENTS = 4096
# Columns in a chunk of a kernel of passes (see ``lowering.loops.MIN_COLUMNS``).
MIN_PASS_COLUMNS = 256
# Splitting continues while (one-thread estimate) / (split time) stays at least this.
MIN_GAIN = 1.2
# A class's gain is the best of its last ``GAIN_WINDOW`` split calls: a split is slowed now
# and then (a page fault, another process for a moment), and a mean of the gains let a
# few slow splits stop splitting that paid (Black-Scholes, GELU at 1e6 amid the suite's
# peers: splits of 470-600 µs against 755 µs on one thread, then one of 970), and the first
# four or five calls after a pause are all slow (the module docstring): a window of eight
# spans them (logp/grad at 1e6 in batches of ten calls among other implementations' batches:
# 56-106 calls of 200 split with a window of four, 185-187 with eight; mean call 486 µs
# against 510-540 on one thread, 650-690 with four).  Splits slowed by a busy core are
# all slow: the best of eight stays low.
GAIN_WINDOW = 8
RETRY_EVERY = 16
# A retried split is this many consecutive split calls, judged by the best: the first
# wakes helpers asleep since the last split (on a VM a futex wake can take 100 µs or
# more), which made every lone retry look like a split that does not pay.
RETRY_SPLITS = 3
# ... unless a split of the retry is slower than this fraction of the single-thread
# estimate: more than waking helpers costs (a busy core), the retry ends there.
RETRY_GIVES_UP = 0.5
# A split this much faster per thread than the single-thread estimate shows the estimate
# wrong (caches shared by more threads gain some tens of percent, not this).
IMPOSSIBLE_GAIN = 1.25
MAX_RETRY_EVERY = 512
# A single-threaded call of at least this many elements measures the kernel's cost.
CALIBRATE_ELEMENTS = 16384
# A fused reduction along a row long enough (``ThreadPolicy.chunk_from``) is computed in
# chunks of ``REDUCTION_CHUNK`` elements, one partial each (see the module docstring):
# whole blocks of a kernel's float sums, about 15-60 µs of work each, so a row long enough
# to split holds enough chunks for the threads to share.  A shorter row is never cut: its
# one gufunc call is faster than the two of a chunked row (measured 1.2-1.8x at 2e5-3e5
# elements of a sum of squares), and it gains little from threads.  Rows are chunked
# from ``CHUNKED_FROM`` elements, or more: from the length the kernel's guessed cost
# (its operations, never a measurement, so the rule depends on the size alone) puts at
# ``CHUNKED_SECONDS``.
REDUCTION_CHUNK = 1 << 16
CHUNKED_FROM = 4 * REDUCTION_CHUNK
CHUNKED_SECONDS = 1e-3
assert REDUCTION_CHUNK % BLOCK == 0
# Initial cost guesses (seconds per element), replaced by measurements.
_BASE_COST, _OP_COST, _TRANSCENDENTAL_COST = 1e-9, 0.3e-9, 4e-9

# A helper thread that has run its chunks spins this long for the next split call before
# it sleeps (waking a sleeping thread costs 20-40 µs, see ``spinning``); once it sees one,
# it spins ``GRACE_SECONDS`` more, leaving the GIL to the caller until its gufunc call has
# released it.  The caller spins up to ``WAIT_SECONDS`` for helpers still running chunks,
# then sleeps: a helper may share its core.
# ``NUMFUSE_SPIN_SECONDS`` (read when the helpers are made) sets the spin; 0: they sleep
# at once.
SPIN_SECONDS = 300e-6
GRACE_SECONDS = 4e-6
WAIT_SECONDS = 300e-6
# int64 words apart, so that the words the threads spin on lie in separate cache lines
_STRIDE = 8


class _Task:
    """One split call's chunks: ``work(index)`` for each index below ``count``, each
    claimed by one thread (``claims``), ``finished`` once run (or skipped, once a chunk
    has raised: the first exception is kept in ``errors``)."""

    __slots__ = ("claims", "count", "errors", "finished", "waiting", "work")

    def __init__(self, work: Callable[[int], None], count: int) -> None:
        self.work = work
        self.count = count
        self.claims = itertools.count()  # next() is atomic under the GIL
        self.finished = [False] * count
        self.errors: list[BaseException] = []
        self.waiting = False  # the caller sleeps on its crew's ``woken``

    def drain(self) -> None:
        """Run chunks until none is left to claim."""
        while True:
            index = next(self.claims)
            if index >= self.count:
                return
            if not self.errors:
                try:
                    self.work(index)
                except BaseException as error:  # re-raised in the calling thread
                    self.errors.append(error)
            self.finished[index] = True


class _Crew:
    """The helper threads of split calls, made once per process (``_crew``).

    Helper ``i`` waits for work on ``words[i * _STRIDE]``, a count the caller increments
    when it hands the helper a task (``tasks[i]``, run in ``contexts[i]``, a copy of the
    caller's context: ``np.errstate`` applies in every thread); it spins on it, then sleeps
    on ``events[i]`` (``sleeping[i]`` set) until it changes.  ``words[progress]`` counts
    finished chunks.  When ``words[i * _STRIDE + 1]`` is not 0 the work is the native
    ``task`` instead (``run_native``).  Where tasks run natively (``native``) a helper
    waits in native code (``spinning.Spinner.serve``: it spins, then sleeps on a futex,
    ``words[i * _STRIDE + 2]`` set meanwhile), runs native tasks there and returns to
    Python only for a Python task: it never waits for the GIL.  One split call uses the
    crew at a time (``busy``); a call finding it in use runs its chunks in its own
    thread."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.progress = size * _STRIDE
        self.words = np.zeros((size + 1) * _STRIDE, np.int64)
        self.task = np.zeros(spinning.TASK_WORDS, np.int64)  # the native task (``run_native``)
        self.generations = itertools.count(1)
        self.tasks: list[_Task | None] = [None] * size
        self.contexts: list[contextvars.Context | None] = [None] * size
        self.sleeping = [False] * size
        self.events = [threading.Event() for _ in range(size)]
        self.busy = threading.Lock()
        self.woken = threading.Event()  # a helper done, for a caller that sleeps
        self.spinner = spinning.spinner()
        self.native = self.spinner is not None and self.spinner.native
        self.spin = self.grace = self.wait = 0
        if self.spinner is not None:
            self.spin = self.spinner.turns(spin_seconds())
            self.grace = self.spinner.turns(GRACE_SECONDS)
            self.wait = self.spinner.turns(WAIT_SECONDS)
        for index in range(size):
            threading.Thread(target=self._serve, args=(index,), daemon=True,
                             name=f"numfuse-{index}").start()

    def _serve(self, index: int) -> None:
        words, word, seen, bump = self.words, index * _STRIDE, 0, None
        mode, spinner = word + 1, self.spinner
        while True:
            if self.native:
                assert spinner is not None
                # returns only with work for Python (or a native task handed out since)
                seen = spinner.serve(words, word, seen, self.spin, self.grace, bump, mode,
                                     self.task, word + 2)
                bump = None
                if words[mode]:
                    spinner.drain(self.task)
                    continue
            else:
                value = seen
                if spinner is not None:  # (without it, callers wait on ``woken`` only)
                    value = spinner.until_changed(words, word, seen, self.spin, self.grace,
                                                  bump)
                if value == seen:
                    event = self.events[index]
                    self.sleeping[index] = True
                    while int(words[word]) == seen:
                        event.wait()
                        event.clear()
                    self.sleeping[index] = False
                    value = int(words[word])
                seen = value
            bump = None
            task, context = self.tasks[index], self.contexts[index]
            if task is not None and context is not None:
                context.run(task.drain)
                if task.waiting:
                    self.woken.set()
                # the next spin counts this helper done in ``words[progress]``, once it has
                # released the GIL: the caller spinning on it then takes the GIL at once
                bump = self.progress
            # the task's chunks hold views of the call's operands and results (the pool
            # lends a block again only once nothing references it)
            task = context = None

    def _hand_out(self, index: int, native: bool) -> None:
        """Tell helper ``index`` that its work (a native task or not) is ready."""
        words = self.words
        words[index * _STRIDE + 1] = native
        if self.native:
            assert self.spinner is not None
            self.spinner.wake(words, index * _STRIDE, index * _STRIDE + 2)
            return
        words[index * _STRIDE] += 1
        if self.sleeping[index]:
            self.events[index].set()

    def run(self, work: Callable[[int], None], count: int, threads: int) -> None:
        """``work(0) … work(count - 1)`` on up to ``threads`` threads, this one included."""
        task = _Task(work, count)
        acquired = self.busy.acquire(blocking=False)
        helpers = min(threads - 1, count - 1, self.size) if acquired else 0
        try:
            for index in range(helpers):
                self.tasks[index] = task
                self.contexts[index] = contextvars.copy_context()
                self._hand_out(index, native=False)
            task.drain()
            if helpers:
                self._wait(task)
        finally:
            for index in range(helpers):
                self.tasks[index] = self.contexts[index] = None
            if acquired:
                self.busy.release()
        if task.errors:
            raise task.errors[0]

    def run_native(self, chunks: NativeChunks, threads: int) -> int:
        """Run ``chunks`` natively on up to ``threads`` threads, this one included (see
        ``spinning``); the floating-point flags they raised (a task's ``FLAGS`` word)."""
        spinner = self.spinner
        assert spinner is not None and self.native
        count = chunks.count
        acquired = self.busy.acquire(blocking=False)
        helpers = min(threads - 1, count - 1, self.size) if acquired else 0
        # a call finding the crew busy runs its chunks alone, on a task of its own
        task = self.task if acquired else np.zeros(spinning.TASK_WORDS, np.int64)
        try:
            chunks.write(task, next(self.generations))
            for index in range(helpers):
                self._hand_out(index, native=True)
            done = spinner.run(task, count, self.wait)
            while done < count:  # a helper's chunk outlasted the spin: it may share a core
                time.sleep(WAIT_SECONDS / 8)
                done = int(task[spinning.DONE])
            return int(task[spinning.FLAGS])
        finally:
            if acquired:
                self.busy.release()

    def _wait(self, task: _Task) -> None:
        """Until every chunk of ``task`` has finished: spinning first, then sleeping."""
        words, progress = self.words, self.progress
        spinning_left = self.spinner is not None
        while True:
            seen = int(words[progress])
            if all(task.finished):
                return
            if spinning_left:
                assert self.spinner is not None
                spinning_left = self.spinner.until_changed(words, progress, seen, self.wait,
                                                           0) != seen
                continue
            self.woken.clear()
            task.waiting = True
            if all(task.finished):
                return
            self.woken.wait(0.01)


def spin_seconds() -> float:
    """How long helper threads spin for the next split call: ``NUMFUSE_SPIN_SECONDS``
    (seconds, at least 0), else ``SPIN_SECONDS``."""
    text = os.environ.get("NUMFUSE_SPIN_SECONDS", "").strip()
    if not text:
        return SPIN_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value >= 0.0:
        warnings.warn(f"NUMFUSE_SPIN_SECONDS={text!r} is not a number of seconds (0 or "
                      f"more); helper threads spin {SPIN_SECONDS:g} s", RuntimeWarning,
                      stacklevel=2)
        return SPIN_SECONDS
    return value


_crew: _Crew | None = None
_crew_lock = threading.Lock()


def _helpers() -> _Crew:
    global _crew
    with _crew_lock:
        if _crew is None:
            _crew = _Crew(max(1, (os.cpu_count() or 2) - 1))
        return _crew


def _forget_crew() -> None:
    """In a forked child: the parent's helper threads do not exist there."""
    global _crew, _crew_lock
    _crew, _crew_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_crew)


def checked(threads: Any) -> int | None:
    """The ``threads=`` option, checked: None (choose per call) or a positive int."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or \
            threads < 1:
        raise ValueError(f"threads= must be a positive int, or None for numba's thread "
                         f"count, not {threads!r}")
    return int(threads)


def resolve(threads: int | None, default: Callable[[], int]) -> int:
    """The thread count for a call now (see the module docstring)."""
    if threads is not None:
        return max(1, int(threads))
    if threading.current_thread() is not threading.main_thread():
        return 1
    return max(1, default())


def chunk_count(seconds: float, elements: int, threads: int) -> int:
    """How many chunks to cut a call expected to take ``seconds`` into (1: do not split)."""
    if threads <= 1 or seconds < PARALLEL_MIN_SECONDS:
        return 1
    wanted = max(2, int(seconds / CHUNK_SECONDS))
    # a multiple of the thread count: 7 chunks on 2 threads left one thread idle for the
    # last (GELU at 1e6: 10% of the call)
    wanted = min(wanted, CHUNKS_PER_THREAD * threads)
    wanted = max(threads, (wanted + threads // 2) // threads * threads)
    return max(1, min(wanted, elements // MIN_CHUNK_ELEMENTS))


def run_chunks(work: Callable[[int], None], count: int, threads: int) -> None:
    """Call ``work(0) … work(count - 1)`` on up to ``threads`` threads (this one included).

    Every thread runs in a copy of the caller's context, so ``np.errstate`` applies to
    all chunks; the first exception raised by any chunk is raised here.
    """
    if threads <= 1 or count <= 1:
        for index in range(count):
            work(index)
        return
    _helpers().run(work, count, threads)


def native_runs() -> bool:
    """Whether split calls can run their chunks natively here (``spinning``): whether the
    helper threads can (made on first need)."""
    return _helpers().native


def run_native(chunks: NativeChunks, threads: int) -> int:
    """Run ``chunks`` on up to ``threads`` threads (this one included), natively; the
    floating-point flags raised (``spinning.flag_names`` names them)."""
    return _helpers().run_native(chunks, threads)


class LoopFunction:
    """A kernel's loop function as threads call it on chunks: its ``address`` (numpy's
    gufunc loop signature), and per operand (inputs, then outputs) its number of core
    dimensions (``ranks``, from the gufunc's signature) and, in ``kinds``, that, its dtype
    and whether it is an output."""

    __slots__ = ("address", "first_output", "kinds", "ranks")

    def __init__(self, address: int, dtypes: tuple[np.dtype[Any], ...],
                 ranks: tuple[int, ...], first_output: int) -> None:
        self.address = address
        self.ranks = ranks
        self.first_output = first_output
        self.kinds = tuple((rank, dtype, position >= first_output) for position, (rank, dtype)
                           in enumerate(zip(ranks, dtypes, strict=True)))

    @classmethod
    def of(cls, step: KernelStep) -> LoopFunction | None:
        """The loop function of ``step``'s kernel, or None when its calls must go through
        numpy: no address known, a kernel of passes, or a kernel whose calls are checked
        in Python afterwards (integer powers)."""
        kernel = step.kernel
        gufunc = kernel.gufunc
        address = getattr(kernel.compiled, "address", 0)
        if not address or step.checked or len(gufunc.types) != 1 or \
                step.operands.passes is not None:
            return None
        ranks = tuple(len([name for name in group.split(",") if name.strip()])
                      for group in re.findall(r"\(([^()]*)\)", gufunc.signature))
        dtypes = tuple(np.dtype(code) for code in gufunc.types[0].replace("->", ""))
        if max(ranks, default=0) > 1 or len(ranks) != len(dtypes):
            return None
        return cls(int(address), dtypes, ranks, gufunc.nin)

    def operands(self, values: Sequence[Any], rows: tuple[int, ...], length: int
                 ) -> tuple[list[Any], list[int], list[int], list[int]] | None:
        """``values`` (the inputs, then the outputs) as the loop function takes them, for a
        loop of ``rows`` (at most one axis) of ``length`` elements: the arrays (numbers
        made 0-d arrays), their addresses, their steps along the rows and along the core
        axis (0 for a broadcast or a ``()`` operand); or None when numpy would do more
        than call the loop — cast, copy an unaligned or overlapping operand, or raise."""
        if len(rows) > 1:
            return None
        outer = rows[0] if rows else 1
        arrays: list[Any] = []
        addresses, outer_steps, core_steps = [], [], []
        address_of = spinning.data_address
        for value, (rank, dtype, output) in zip(values, self.kinds, strict=True):
            if type(value) is not np.ndarray:
                if value is None or output:
                    return None
                value = np.asarray(value)
            flags = value.flags
            if value.dtype != dtype or not flags.aligned:
                return None
            shape = value.shape
            axes = len(shape) - rank
            if axes < 0 or axes > len(rows) or (rank and shape[-1] != length):
                return None
            strides = value.strides
            step = 0
            if axes and outer > 1:
                if shape[0] == outer:
                    step = strides[0]
                elif shape[0] != 1 or output:
                    return None
            elif output and outer > 1:
                return None  # numpy refuses to broadcast an output
            core = strides[-1] if rank else 0
            if output and (not flags.writeable or
                           (rank and length > 1 and core != dtype.itemsize)):
                return None
            arrays.append(value)
            addresses.append(address_of(value))
            outer_steps.append(step)
            core_steps.append(core)
        first_output = self.first_output
        for position in range(first_output, len(arrays)):
            output = arrays[position]
            low = addresses[position]
            high = low + output.nbytes if output.flags.c_contiguous else None
            for other in range(position):
                value = arrays[other]
                start = addresses[other]
                if high is not None and value.flags.c_contiguous and (
                        start >= high or start + value.nbytes <= low):
                    continue  # apart (both contiguous): no need to ask numpy
                if np.may_share_memory(output, value) and not (
                        other < first_output and addresses[other] == addresses[position]
                        and value.strides == output.strides and value.shape == output.shape):
                    return None  # numpy copies an operand overlapping an output
        return arrays, addresses, outer_steps, core_steps

    def chunks(self, addresses: Sequence[int], outer_steps: Sequence[int],
               core_steps: Sequence[int], pieces: Sequence[tuple[int, int, int, int]],
               keep: Any) -> NativeChunks:
        """The calls of the loop function on ``pieces`` (first row, rows, first core
        element, core elements) of operands at ``addresses`` with those steps; ``keep``:
        what must stay alive while they run."""
        operands = list(zip(addresses, outer_steps, core_steps, strict=True))
        count, width = len(pieces), len(operands)
        words = np.array([*(address + first_row * outer + first * core
                            for first_row, _rows, first, _length in pieces
                            for address, outer, core in operands),
                          *(size for _first_row, rows, _first, length in pieces
                            for size in (rows, length)),
                          *outer_steps, *(core for core, rank in
                                          zip(core_steps, self.ranks, strict=True) if rank)],
                         np.int64)
        return NativeChunks(self.address, words, count, width, keep)


class NativeChunks:
    """The chunks of one split call as calls of a kernel's loop function, in one int64
    array ``words``: per chunk its argument pointers (``count`` rows of ``width``), then
    per chunk its dimensions (rows, core length), then the steps all chunks share;
    ``keep`` holds what they point into."""

    __slots__ = ("address", "count", "keep", "width", "words")

    def __init__(self, address: int, words: np.ndarray[Any, Any], count: int, width: int,
                 keep: Any) -> None:
        self.address = address
        self.words = words
        self.count = count
        self.width = width
        self.keep = keep

    def write(self, task: np.ndarray[Any, Any], generation: int) -> None:
        """Describe the chunks in ``task`` (see ``spinning``), opened last."""
        task[spinning.TICKET] = spinning.closed_ticket(generation)
        task[spinning.DONE] = task[spinning.FLAGS] = 0
        count, width = self.count, self.width
        base = spinning.data_address(self.words)
        dims = base + 8 * count * width
        task[spinning.FUNCTION:spinning.NDIMS + 1] = (
            self.address, base, dims, dims + 16 * count, width, 2)
        task[spinning.TICKET] = spinning.ticket(generation, count)

# numpy's floating-point flags in the order it reports them, with their errstate keys.
_FLAGS = (("divide by zero", "divide", 1), ("overflow", "over", 2),
          ("underflow", "under", 4), ("invalid value", "invalid", 8))


class FlagsReportedOnce:
    """A context running several gufunc calls (on any threads started inside) that
    collects the floating-point flags they raise, then reports each flag once, as numpy
    reports those of one call of the gufunc ``name`` under the caller's ``np.errstate``
    (nothing when the calls raised an exception)."""

    __slots__ = ("errstate", "name", "raised")

    def __init__(self, name: str) -> None:
        self.name = name
        self.raised: set[str] = set()
        self.errstate = np.errstate(all="call", call=self._record)

    def _record(self, kind: str, _status: int) -> None:
        self.raised.add(kind)

    def __enter__(self) -> None:
        self.errstate.__enter__()

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        self.errstate.__exit__(kind, error, traceback)
        if self.raised and kind is None:
            report_flags(self.raised, self.name)


def report_flags(raised: set[str], name: str) -> None:
    """Report the flags ``raised`` (numpy's names: ``"divide by zero"``...) by a call of
    the gufunc ``name`` as numpy does under the errstate in force: in numpy's order, each
    ignored, warned, raised, printed, logged or passed to the error callback."""
    settings: dict[str, Any] = dict(np.geterr())
    callback: Any = np.geterrcall()
    status = sum(bit for kind, _key, bit in _FLAGS if kind in raised)
    for kind, key, _bit in _FLAGS:
        if kind not in raised or settings[key] == "ignore":
            continue
        message = f"{kind} encountered in {name}"
        mode = settings[key]
        if mode == "raise":
            raise FloatingPointError(message)
        if mode == "warn":
            warnings.warn(message, RuntimeWarning, stacklevel=4)
        elif mode == "print":
            print(f"Warning: {message}", file=sys.stderr)
        elif mode == "call" and callback is not None:
            callback(kind, status)
        elif mode == "log" and callback is not None:
            callback.write(f"Warning: {message}\n")


def reduction_units(length: int) -> tuple[int, int]:
    """The whole ``REDUCTION_CHUNK``-element chunks of a row of ``length`` elements and the
    length of the shorter last chunk (0: none)."""
    return divmod(length, REDUCTION_CHUNK)


def initial_cost(nodes: Iterable[Node]) -> float:
    """A guess of a kernel's seconds per loop element from the operations it computes."""
    return _BASE_COST + sum(_TRANSCENDENTAL_COST if _transcendental(node) else _OP_COST
                            for node in nodes)


def _transcendental(node: Node) -> bool:
    row = OPS.get(node.op)
    return row is not None and row.transcendental


def split_plan(length: int, rows: tuple[int, ...], count: int, depth: int = 1,
               cut_core: bool = True) -> tuple[bool, list[int]] | None:
    """Cut a loop of ``rows`` rows of ``length`` elements into about ``count`` chunks: along
    the core axis when it is long (and ``cut_core``: a reduction folded along it would
    add the chunks' partials in an order depending on the cut), else along the first row
    axis; (along_core, chunk bounds), or None when neither is worth it.  Core-axis bounds
    are multiples of 64.
    A kernel of passes has ``depth`` elements per core element (its accumulated rows,
    which are never split: each column adds them in order); its chunks are at least
    ``MIN_PASS_COLUMNS`` wide, as its passes over short rows run slowly."""
    minimum = MIN_CHUNK_ELEMENTS
    widest = 64 if depth == 1 else MIN_PASS_COLUMNS
    if cut_core and length * depth >= 2 * minimum and length >= 2 * widest:
        count = min(count, length * depth // minimum, length // widest)
        step = length / count
        bounds = [min(length, round(index * step / 64) * 64) for index in range(count)]
        return True, [*bounds, length]
    if rows and rows[0] >= 2:
        count = min(count, rows[0])
        step = rows[0] / count
        return False, [round(index * step) for index in range(count)] + [rows[0]]
    return None


def _combiner(reduction: Reduction) -> Callable[[Any], Any]:
    """Combines the chunks' partials (the last axis) of a fused reduction, in order."""
    reduce, dtype = getattr(np, reduction.ufunc).reduce, reduction.dtype
    return lambda partials: reduce(partials, axis=-1, dtype=dtype)


_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def explores(count: int, every: int) -> bool:
    """Whether call ``count`` of a class is one of the one in ``every`` that go the other
    way (a split retried, a single-threaded call measured): spread by the golden ratio,
    so calls made in batches of any length explore at every position of a batch.  A
    fixed period keeps landing on one position — with batches of 8 and a period of 16,
    always the first call after the others ran, the slowest —, and splits retried
    there never seem to pay."""
    return (count * _GOLDEN) % 1.0 < 1.0 / every


def next_retry(retry: int, gain: float) -> int:
    """How many calls apart to retry splitting after a split call left the class's
    ``gain`` as it is: twice as far as ``retry`` while splitting does not pay (at most
    ``MAX_RETRY_EVERY``), back to ``RETRY_EVERY`` once it does."""
    return RETRY_EVERY if gain >= MIN_GAIN else min(2 * retry, MAX_RETRY_EVERY)


class SizeClass:
    """What one kernel learnt of its calls of one size class: ``cost``, seconds per loop
    element, the kernel's guess until ``measured``, then the least over its
    single-threaded calls (a call is only ever slowed: by a first touch of its memory, a
    busy core; the least is what one thread can do, and what a split must beat);
    ``gain``, how much faster than that estimate the best of the ``recent`` split calls
    (at most ``GAIN_WINDOW``) was; ``large``, how many calls it has seen; ``retry``, how
    many calls apart splits are retried while they do not pay (see ``next_retry``)."""

    __slots__ = ("calibrated", "cost", "doubt", "gain", "large", "measured", "recent",
                 "reference", "retry", "trials")

    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.measured = False
        self.calibrated = False  # measured once at least (``measured``: and trusted now)
        self.gain = 2.0
        self.recent: list[float] = []
        self.large = 0
        self.retry = RETRY_EVERY
        self.doubt: float | None = None
        self.reference: float | None = None
        self.trials = 0  # the splits of a retry still to make (``RETRY_SPLITS``)

    def confirm(self, single: float) -> None:
        """After splits stopped paying (``doubt``: the best recent split's seconds per
        element), a single-threaded call took ``single`` seconds per element: the gain
        measured against it, a call made under the same conditions, decides.  The
        estimate ``cost`` is the least over all single-threaded calls, so splits slowed
        with everything else (the first calls after a pause: the cores' clocks, the
        caches) are not judged against a call made at full speed."""
        if self.doubt is None:
            return
        gain, self.doubt = single / self.doubt, None
        if gain >= MIN_GAIN:
            # on probation: the next split must beat this call too (``judged``), else
            # splitting stops at once (the single call itself was slowed: a busy core)
            self.gain, self.recent, self.retry = gain, [gain], RETRY_EVERY
            self.reference = single

    def judged(self, seconds: float, elements: float) -> bool:
        """After ``confirm`` restored splitting: whether a split taking ``seconds`` for
        ``elements`` beat the single-threaded call that restored it; if not, splitting
        stops (the gain is that split's).  True when there is nothing to judge."""
        reference, self.reference = self.reference, None
        if reference is None:
            return True
        gain = reference * elements / max(seconds, 1e-9)
        if gain >= MIN_GAIN:
            return True
        self.gain, self.recent = gain, [gain]
        self.retry = next_retry(self.retry, gain)
        return False


class ThreadPolicy:
    """The gufunc calls of one kernel step: each call as it is, or cut into chunks that
    several threads run when that pays (see the module docstring).

    Invariants: ``guess`` is the kernel's seconds per loop element guessed from its
    operations; ``classes`` holds a ``SizeClass`` per size class met by a large call;
    ``small`` is ``PARALLEL_MIN_SECONDS`` divided by the lowest cost known (measured in
    any class, else the guess): the loop size below which a call is never split, and
    never above ``chunk_from`` when the kernel ``folds`` a reduction along its rows
    (a row that long is always chunked, see ``_chunked``; ``chunk_from`` depends on the
    kernel's operations alone); ``cores`` says which operands are ``(n)`` operands and
    ``combiners`` how the chunks' partials of each output combine (None: not a fused
    reduction).
    """

    __slots__ = ("chunk_from", "classes", "combiners", "cores", "folds", "guess", "loop",
                 "name", "settings", "small", "step")

    def __init__(self, step: KernelStep, settings: Settings) -> None:
        self.step = step
        self.settings = settings
        self.guess = initial_cost(step.kernel.region.nodes)
        self.folds = bool(step.completions) and step.operands.passes is None
        self.cores = tuple(core for _slot, _prepare, core in step.operands.operands)
        # per gufunc output: how chunks' partials of a fused reduction combine, else None
        self.combiners = tuple(None if completion is None else _combiner(completion.reduction)
                               for completion in step.completions) \
            if self.folds else (None,) * len(step.out_dtypes)
        self.name = getattr(step.kernel.gufunc, "__name__", "kernel")
        self.loop = LoopFunction.of(step)  # None: chunks are gufunc calls, run in Python
        self.classes: dict[int, SizeClass] = {}
        self.chunk_from = max(CHUNKED_FROM, int(CHUNKED_SECONDS / self.guess))
        if self.folds and any(completion is not None and completion.reduction.ufunc ==
                              "multiply" and completion.reduction.dtype.kind == "f"
                              for completion in step.completions):
            # a float product multiplies in numpy's order, element after element: its
            # rows are never cut (the chunks' partials would round otherwise)
            self.chunk_from = sys.maxsize
        self.small = self._small(self.guess)

    def _small(self, cost: float) -> int:
        small = int(PARALLEL_MIN_SECONDS / cost)
        return min(small, self.chunk_from) if self.folds else small

    def size_class(self, elements: int) -> SizeClass:
        """The record of calls of about ``elements`` (within a factor of two)."""
        key = elements.bit_length()
        found = self.classes.get(key)
        if found is None:
            found = self.classes[key] = SizeClass(self.guess)
        return found

    def call(self, operands: list[Any], outs: Sequence[Any] | None) -> Any:
        """The step's gufunc call (see ``runtime.GufuncCalls``): one plain call when the
        loop is smaller than ``small``, else ``_large``."""
        layout = self.step.operands
        if operands and (operands[layout.core].size >= self.small or
                         (layout.rows and layout.loop_bound(operands) >= self.small)):
            return self._large(operands, outs)
        if outs is not None:
            return self.step.ufunc(*operands, out=outs)
        return self.step.ufunc(*operands)

    def _large(self, operands: list[Any], outs: Sequence[Any] | None) -> Any:
        """A call that may be worth splitting: split when the kernel's cost is measured,
        the call is long enough and splitting has been paying (or is due a retry); else one
        call, which measures the cost.  A fused reduction along long rows is chunked
        either way (``_chunked``), on one thread or several."""
        step = self.step
        threads = self._threads()
        if threads == 1 and not self.folds:  # nothing to decide, nor to measure
            return self._once(operands, outs)
        ranks = step.operands.ranks
        rows = self._rows(operands)
        core = operands[step.operands.core]
        length = np.shape(core)[-1]
        chunked = self.folds and length >= self.chunk_from and self._aligned(operands,
                                                                              length)
        if threads == 1:
            return self._one_thread(operands, rows, length, outs, chunked)
        depth = np.shape(core)[-2] if ranks[step.operands.core] == 2 else 1
        elements = length * depth * math.prod(rows)
        known = self.size_class(elements)
        expected = known.cost * elements
        known.large += 1
        count = chunk_count(expected, elements, threads)
        if depth > 1:
            # a kernel of passes: one chunk per thread, as wide as can be (its passes over
            # narrower rows run slower than a chunk handed out late would cost)
            count = min(count, threads)
        if count == 1 and known.measured:
            # too short to split, its cost known: nothing to decide, nor to time (the
            # estimate, the least ever measured, only matters for calls long enough)
            return self._one_thread(operands, rows, length, outs, chunked)
        paying = known.gain >= MIN_GAIN
        if known.trials and count > 1 and known.measured:  # a retry goes on splitting
            known.trials -= 1
            split = True
        else:
            due = explores(known.large, RETRY_EVERY if paying else known.retry)
            split = count > 1 and known.measured and paying != due
            if split and not paying:
                known.trials = RETRY_SPLITS - 1
        if split and chunked:
            return self._timed_split(known, expected, threads, self._chunked, operands,
                                     rows, length, outs, count)
        if split:
            plan = split_plan(length, rows, count, depth, cut_core=not self.folds)
            if plan is not None:
                return self._timed_split(known, expected, threads, self._split, operands, ranks,
                                         rows, length, outs, *plan)
        start = time.perf_counter()
        results = self._one_thread(operands, rows, length, outs, chunked)
        if elements >= CALIBRATE_ELEMENTS:  # learn this kernel's cost per element
            measured = (time.perf_counter() - start) / elements
            known.confirm(measured)
            # the first measurement replaces the guess; a measurement asked for by an
            # impossible gain (the estimate too high) only lowers it: one slowed as well
            # (a cold call) had raised it, and every split then looked impossible again
            known.cost = measured if not known.calibrated else min(known.cost, measured)
            known.measured = known.calibrated = True
            lowest = min(found.cost for found in self.classes.values() if found.measured)
            self.small = self._small(lowest)
        return results

    def _one_thread(self, operands: list[Any], rows: tuple[int, ...], length: int,
                    outs: Sequence[Any] | None, chunked: bool) -> Any:
        """The call in this thread alone: its chunks (``chunked``: a fused reduction along
        long rows, ``_chunked``), else one gufunc call."""
        if chunked:
            return self._chunked(operands, rows, length, outs, 1)
        return self._once(operands, outs)

    def _once(self, operands: list[Any], outs: Sequence[Any] | None) -> Any:
        """One gufunc call in this thread."""
        ufunc = self.step.ufunc
        return ufunc(*operands) if outs is None else ufunc(*operands, out=outs)

    @staticmethod
    def _timed_split(known: SizeClass, expected: float, threads: int,
                     run: Callable[..., Any], *arguments: Any) -> Any:
        """``run(*arguments)``, a split call on up to ``threads`` threads, updating
        ``known.gain`` with its speed-up over the single-thread estimate ``expected``
        (the best of the last ``GAIN_WINDOW``).
        A speed-up beyond the thread count means the estimate is wrong — measured on a
        call slowed by the first touch of its memory —: the class measures its cost
        again, on one thread, at its next call (else it would go on splitting calls
        that one thread runs faster, until its next due single-threaded call)."""
        _helpers()  # made before the clock starts: the first split must not time it
        start = time.perf_counter()
        results = run(*arguments, threads=threads)
        elapsed = time.perf_counter() - start
        if not known.judged(elapsed, expected / known.cost):
            return results  # restored by a slowed single-threaded call: stopped again
        observed = expected / max(elapsed, 1e-9)
        if observed > threads * IMPOSSIBLE_GAIN:
            known.measured = False
            return results
        if observed < RETRY_GIVES_UP:
            known.trials = 0  # no mere wake-up: the retry ends
        known.recent.append(observed)
        del known.recent[:-GAIN_WINDOW]
        known.gain = max(known.recent)
        if not known.trials or known.gain >= MIN_GAIN:
            known.retry = next_retry(known.retry, known.gain)
        # not paying (a retry's splits all made): the next call runs on one thread, and
        # ``confirm`` decides
        known.doubt = known.cost / known.gain if known.gain < MIN_GAIN and \
            not known.trials else None
        return results

    def _rows(self, operands: list[Any]) -> tuple[int, ...]:
        """The loop's rows: the operands' shapes but their core dimensions, broadcast."""
        shapes = {shape[:len(shape) - rank] for value, rank in
                  zip(operands, self.step.operands.ranks, strict=True)
                  for shape in (getattr(value, "shape", ()),)}
        return shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes)

    def _aligned(self, operands: list[Any], length: int) -> bool:
        """Whether every ``(n)`` operand has rows of ``length`` (else the plain call
        raises numpy's broadcast error)."""
        return all(value.shape[-1] == length
                   for value, core in zip(operands, self.cores, strict=True) if core)

    def _chunked(self, operands: list[Any], rows: tuple[int, ...], length: int,
                 outs: Sequence[Any] | None, pieces: int, threads: int = 1) -> Any:
        """A kernel folding reductions along rows of ``length`` >= ``chunk_from``:
        each row cut into chunks of ``REDUCTION_CHUNK`` elements (the last one shorter),
        one partial per chunk, the partials of each row combined in chunk order.  The
        chunks are handed out to threads as ``pieces`` ranges of chunks (1: all in this
        thread), each range one gufunc call on its chunks as rows (reshaped views) plus
        one for the shorter last chunk, on up to ``threads`` threads; the partials are the
        same however many pieces."""
        step = self.step
        full, tail = reduction_units(length)
        units = full + (tail > 0)
        given = outs or (None,) * len(step.out_dtypes)
        outputs = [np.empty((*rows, units), dtype) if combine is not None
                   else out if out is not None else np.empty((*rows, length), dtype)
                   for dtype, combine, out in zip(step.out_dtypes, self.combiners, given,
                                                  strict=True)]
        pieces = max(1, min(pieces, units))
        bounds = [round(index * units / pieces) for index in range(pieces + 1)]
        if pieces > 1 and not rows and self._chunked_natively(operands, outputs, length,
                                                              bounds, threads):
            return self._combined(outputs)

        calls: list[list[tuple[list[Any], tuple[Any, ...]]]] = []  # sliced beforehand
        for first, last in itertools.pairwise(bounds):
            calls.append([])
            if min(last, full) > first:
                calls[-1].append(self._units(operands, outputs, first, min(last, full),
                                             REDUCTION_CHUNK))
            if last > full:  # the shorter last chunk
                calls[-1].append(self._units(operands, outputs, full, units, tail))
        ufunc = step.ufunc

        def work(index: int) -> None:
            for chunk, out in calls[index]:
                ufunc(*chunk, out=out)

        with FlagsReportedOnce(self.name):
            if pieces == 1:
                work(0)
            else:
                run_chunks(work, pieces, threads)
            return self._combined(outputs)

    def _combined(self, outputs: list[Any]) -> Any:
        """The results of a chunked call: its outputs, partials combined."""
        results = [output if combine is None else combine(output)
                   for output, combine in zip(outputs, self.combiners, strict=True)]
        return tuple(results) if len(results) > 1 else results[0]

    def _chunked_natively(self, operands: list[Any], outputs: list[Any], length: int,
                          bounds: list[int], threads: int) -> bool:
        """``_chunked``'s calls on one row, run natively (``run_native``) when the loop
        function can take them; False (nothing run) otherwise."""
        loop = self.loop
        if loop is None or not native_runs():
            return False
        # a partial's output is presented as its first element (a 0-d view)
        presented = [output if combine is None else output[..., 0]
                     for output, combine in zip(outputs, self.combiners, strict=True)]
        found = loop.operands([*operands, *presented], (), length)
        if found is None:
            return False
        arrays, addresses, _outer, core_steps = found
        # rows of REDUCTION_CHUNK elements: a partial per row
        outer_steps = [REDUCTION_CHUNK * core if rank else 0
                       for core, rank in zip(core_steps, loop.ranks, strict=True)]
        for position, combine in enumerate(self.combiners, start=loop.first_output):
            if combine is not None:
                outer_steps[position] = outputs[position - loop.first_output].strides[-1]
        full, tail = reduction_units(length)
        pieces = []
        for first, last in itertools.pairwise(bounds):
            if min(last, full) > first:
                pieces.append((first, min(last, full) - first, 0, REDUCTION_CHUNK))
            if last > full:  # the shorter last chunk
                pieces.append((full, 1, 0, tail))
        self._run_natively(loop.chunks(addresses, outer_steps, core_steps, pieces,
                                       (arrays, outputs)), threads)
        return True

    def _run_natively(self, chunks: NativeChunks, threads: int) -> None:
        raised = spinning.flag_names(run_native(chunks, threads))
        if raised:
            report_flags(raised, self.name)

    def _units(self, operands: list[Any], outputs: list[Any], first: int, last: int,
               width: int) -> tuple[list[Any], tuple[Any, ...]]:
        """The operands and outputs of one gufunc call over chunks ``first`` to ``last``
        (exclusive), each ``width`` elements long, as rows: ``(n)`` operands and outputs
        sliced and reshaped (views), the other operands given a length-1 axis for the
        chunks, partials written to ``outputs[..., first:last]``."""
        start = first * REDUCTION_CHUNK
        stop = start + (last - first) * width
        shape = (last - first, width)
        chunk = []
        for value, core in zip(operands, self.cores, strict=True):
            if core:
                part = value[..., start:stop]
                value = part.reshape(*part.shape[:-1], *shape)
            elif getattr(value, "ndim", 0):
                value = value[..., np.newaxis]
            chunk.append(value)
        out = []
        for output, combine in zip(outputs, self.combiners, strict=True):
            if combine is None:
                part = output[..., start:stop]
                output = part.reshape(*part.shape[:-1], *shape)
            else:
                output = output[..., first:last]
            out.append(output)
        return chunk, tuple(out)

    def _split(self, operands: list[Any], ranks: tuple[int, ...], rows: tuple[int, ...],
               length: int, outs: Sequence[Any] | None, along_core: bool,
               bounds: list[int], threads: int = 1) -> Any:
        """Run the call in chunks of the core axis (or of the first row axis) on up to
        ``threads`` threads, writing into preallocated outputs; per-chunk partial
        reductions are combined.  ``ranks`` are the operands' numbers of core dimensions."""
        step = self.step
        count = len(bounds) - 1
        outputs: list[Any] = []
        given = outs or (None,) * len(step.out_dtypes)
        for dtype, completion, out in zip(step.out_dtypes,
                                          step.completions or (None,) * len(given), given,
                                          strict=True):
            if out is not None:
                outputs.append(out)
            elif step.placeholder or completion is not None:
                outputs.append(None if along_core else np.empty(rows, dtype))
            else:
                outputs.append(np.empty((*rows, length), dtype))
        if self._split_natively(operands, rows, length, outputs, along_core, bounds,
                                threads):
            return tuple(outputs) if len(outputs) > 1 else outputs[0]
        partials: list[Any] = [None] * count
        depth = len(rows)

        def piece(value: Any, core: bool, rank: int, start: int, stop: int) -> Any:
            if along_core:
                return value[..., start:stop] if core else value
            dims = np.ndim(value) - rank
            if dims < depth or np.shape(value)[0] == 1:
                return value  # broadcast along the split axis
            return value[start:stop]

        # every chunk's operands are sliced before the threads start: a thread then holds
        # the GIL only for its gufunc calls (see ``_Crew``)
        calls = []
        for start, stop in itertools.pairwise(bounds):
            chunk = [piece(value, core, rank, start, stop)
                     for value, core, rank in zip(operands, self.cores, ranks, strict=True)]
            out = tuple(None if target is None else
                        (target[..., start:stop] if along_core else target[start:stop])
                        for target in outputs)
            calls.append((chunk, out))
        ufunc = step.ufunc

        def work(index: int) -> None:
            chunk, out = calls[index]
            result = ufunc(*chunk, out=out)
            partials[index] = result if isinstance(result, tuple) else (result,)

        with FlagsReportedOnce(self.name):
            run_chunks(work, count, threads)
        results = []
        for position, target in enumerate(outputs):
            if target is not None or step.placeholder:
                results.append(target)
                continue
            completion = step.completions[position]
            assert completion is not None
            results.append(completion.combine([part[position] for part in partials]))
        return tuple(results) if len(results) > 1 else results[0]

    def _split_natively(self, operands: list[Any], rows: tuple[int, ...], length: int,
                        outputs: list[Any], along_core: bool, bounds: list[int],
                        threads: int) -> bool:
        """``_split``'s chunks run natively (``run_native``) when the loop function can
        take them, into ``outputs``; False (nothing run) otherwise."""
        loop = self.loop
        if loop is None or not native_runs():
            return False
        found = loop.operands([*operands, *outputs], rows, length)
        if found is None:
            return False
        arrays, addresses, outer_steps, core_steps = found
        outer = rows[0] if rows else 1
        pieces = [(0, outer, start, stop - start) if along_core else
                  (start, stop - start, 0, length)
                  for start, stop in itertools.pairwise(bounds)]
        self._run_natively(loop.chunks(addresses, outer_steps, core_steps, pieces, arrays),
                           threads)
        return True

    def _threads(self) -> int:
        return resolve(self.settings.threads, self.settings.default_threads)
