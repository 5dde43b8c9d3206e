"""Running one kernel call on several threads, and deciding when that pays.

numpy releases the GIL while a gufunc loop runs, so a large call can be cut into chunks
that threads run at the same time (numba's ``target="parallel"`` gufuncs were slower than
single-threaded ones on 2 cores).  Chunks are handed out one at a time from a shared
counter — the calling thread takes part — so a thread slowed by a busy core simply takes
fewer chunks instead of making everyone wait at a static split.

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
class's single-threaded estimate, and when the gain falls below ``MIN_GAIN`` (the other
cores are busy) the class stays on one thread, trying a split again every
``RETRY_EVERY`` large calls in case the machine has become free; while splitting pays,
every ``RETRY_EVERY``-th call runs on one thread to keep the estimate current.

``ThreadPolicy`` applies this policy to the gufunc calls of one kernel step of a program
(the calls of its ``runtime.LocalRunner``); ``run_chunks`` runs the chunks.
"""

from __future__ import annotations

import contextvars
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from .ops import OPS

if TYPE_CHECKING:
    from .graph import Node
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
RETRY_EVERY = 16
# A single-threaded call of at least this many elements measures the kernel's cost.
CALIBRATE_ELEMENTS = 16384
# Initial cost guesses (seconds per element), replaced by measurements.
_BASE_COST, _OP_COST, _TRANSCENDENTAL_COST = 1e-9, 0.3e-9, 4e-9

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1),
                                       thread_name_prefix="numfuse")
        return _pool


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
    return max(1, min(wanted, CHUNKS_PER_THREAD * threads, elements // MIN_CHUNK_ELEMENTS))


def run_chunks(work: Callable[[int], None], count: int, threads: int) -> None:
    """Call ``work(0) … work(count - 1)`` on up to ``threads`` threads (this one included).

    Every thread runs in a copy of the caller's context, so ``np.errstate`` applies to
    all chunks; the first exception raised by any chunk is raised here.
    """
    counter = itertools.count()
    errors: list[BaseException] = []

    def drain() -> None:
        while not errors:
            index = next(counter)
            if index >= count:
                return
            try:
                work(index)
            except BaseException as error:  # re-raised in the calling thread
                errors.append(error)
                return

    helpers = min(threads, count) - 1
    pool = _executor() if helpers > 0 else None
    futures = [pool.submit(contextvars.copy_context().run, drain)
               for _ in range(helpers)] if pool is not None else []
    drain()
    for future in futures:
        if not future.cancel():  # a helper that never started has nothing to finish
            future.result()
    if errors:
        raise errors[0]


def initial_cost(nodes: Iterable[Node]) -> float:
    """A guess of a kernel's seconds per loop element from the operations it computes."""
    return _BASE_COST + sum(_TRANSCENDENTAL_COST if _transcendental(node) else _OP_COST
                            for node in nodes)


def _transcendental(node: Node) -> bool:
    row = OPS.get(node.op)
    return row is not None and row.transcendental


def split_plan(length: int, rows: tuple[int, ...], count: int, depth: int = 1
               ) -> tuple[bool, list[int]] | None:
    """Cut a loop of ``rows`` rows of ``length`` elements into about ``count`` chunks: along
    the core axis when it is long, else along the first row axis; (along_core, chunk
    bounds), or None when neither is worth it.  Core-axis bounds are multiples of 64.
    A kernel of passes has ``depth`` elements per core element (its accumulated rows,
    which are never split: each column adds them in order); its chunks are at least
    ``MIN_PASS_COLUMNS`` wide, as its passes over short rows run slowly."""
    minimum = MIN_CHUNK_ELEMENTS
    widest = 64 if depth == 1 else MIN_PASS_COLUMNS
    if length * depth >= 2 * minimum and length >= 2 * widest:
        count = min(count, length * depth // minimum, length // widest)
        step = length / count
        bounds = [min(length, round(index * step / 64) * 64) for index in range(count)]
        return True, [*bounds, length]
    if rows and rows[0] >= 2:
        count = min(count, rows[0])
        step = rows[0] / count
        return False, [round(index * step) for index in range(count)] + [rows[0]]
    return None


class SizeClass:
    """What one kernel learnt of its calls of one size class: ``cost``, seconds per loop
    element, the kernel's guess until ``measured``, then the least over its
    single-threaded calls (a call is only ever slowed: by a first touch of its memory, a
    busy core; the least is what one thread can do, and what a split must beat);
    ``gain``, a running mean of how much faster split calls were
    than that estimate; ``large``, how many calls it has seen."""

    __slots__ = ("cost", "gain", "large", "measured")

    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.measured = False
        self.gain = 2.0
        self.large = 0


class ThreadPolicy:
    """The gufunc calls of one kernel step: each call as it is, or cut into chunks that
    several threads run when that pays (see the module docstring).

    Invariants: ``guess`` is the kernel's seconds per loop element guessed from its
    operations; ``classes`` holds a ``SizeClass`` per size class met by a large call;
    ``small`` is ``PARALLEL_MIN_SECONDS`` divided by the lowest cost known (measured in
    any class, else the guess): the loop size below which a call is never split.
    """

    __slots__ = ("classes", "guess", "settings", "small", "step")

    def __init__(self, step: KernelStep, settings: Settings) -> None:
        self.step = step
        self.settings = settings
        self.guess = initial_cost(step.kernel.region.nodes)
        self.small = int(PARALLEL_MIN_SECONDS / self.guess)
        self.classes: dict[int, SizeClass] = {}

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
        call, which measures the cost."""
        step = self.step
        ranks = step.operands.ranks
        rows = np.broadcast_shapes(*(np.shape(value)[:np.ndim(value) - rank]
                                     for value, rank in zip(operands, ranks, strict=True)))
        core = operands[step.operands.core]
        length = np.shape(core)[-1]
        depth = np.shape(core)[-2] if ranks[step.operands.core] == 2 else 1
        elements = length * depth * math.prod(rows)
        known = self.size_class(elements)
        expected = known.cost * elements
        known.large += 1
        threads = self._threads()
        count = chunk_count(expected, elements, threads)
        if depth > 1:
            # a kernel of passes: one chunk per thread, as wide as can be (its passes over
            # narrower rows run slower than a chunk handed out late would cost)
            count = min(count, threads)
        due = known.large % RETRY_EVERY == 0
        paying = known.gain >= MIN_GAIN
        if count > 1 and known.measured and paying != due:
            split = split_plan(length, rows, count, depth)
            if split is not None:
                start = time.perf_counter()
                results = self._split(operands, ranks, rows, length, outs, *split)
                observed = expected / max(time.perf_counter() - start, 1e-9)
                known.gain = 0.7 * known.gain + 0.3 * observed
                return results
        start = time.perf_counter()
        results = step.ufunc(*operands) if outs is None else step.ufunc(*operands, out=outs)
        if elements >= CALIBRATE_ELEMENTS:  # learn this kernel's cost per element
            measured = (time.perf_counter() - start) / elements
            known.cost = measured if not known.measured else min(known.cost, measured)
            known.measured = True
            lowest = min(found.cost for found in self.classes.values() if found.measured)
            self.small = int(PARALLEL_MIN_SECONDS / lowest)
        return results

    def _split(self, operands: list[Any], ranks: tuple[int, ...], rows: tuple[int, ...],
               length: int, outs: Sequence[Any] | None, along_core: bool,
               bounds: list[int]) -> Any:
        """Run the call in chunks of the core axis (or of the first row axis) on threads,
        writing into preallocated outputs; per-chunk partial reductions are combined.
        ``ranks`` are the operands' numbers of core dimensions."""
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
        partials: list[Any] = [None] * count
        depth = len(rows)

        cores = [core for _slot, _prepare, core in step.operands.operands]

        def piece(value: Any, core: bool, rank: int, start: int, stop: int) -> Any:
            if along_core:
                return value[..., start:stop] if core else value
            dims = np.ndim(value) - rank
            if dims < depth or np.shape(value)[0] == 1:
                return value  # broadcast along the split axis
            return value[start:stop]

        def work(index: int) -> None:
            start, stop = bounds[index], bounds[index + 1]
            chunk = [piece(value, core, rank, start, stop)
                     for value, core, rank in zip(operands, cores, ranks, strict=True)]
            out = tuple(None if target is None else
                        (target[..., start:stop] if along_core else target[start:stop])
                        for target in outputs)
            result = step.ufunc(*chunk, out=out)
            partials[index] = result if isinstance(result, tuple) else (result,)

        run_chunks(work, count, self._threads())
        results = []
        for position, target in enumerate(outputs):
            if target is not None or step.placeholder:
                results.append(target)
                continue
            completion = step.completions[position]
            assert completion is not None
            results.append(completion.combine([part[position] for part in partials]))
        return tuple(results) if len(results) > 1 else results[0]

    def _threads(self) -> int:
        return resolve(self.settings.threads, self.settings.default_threads)
