"""Memory of numfuse calls: time with the pool on and off, and peak bytes against numpy.

**Speed** (the default): ``logp_grad`` and ``black_scholes`` (``workloads.py``) at 1e5 to
1e7 elements, each call's results kept until the next call replaces them (as in a loop
``result = f(x)``), timed as

* ``numpy`` -- the function itself;
* ``pool`` -- ``numfuse.jit(..., threads=1)`` with the memory pool on (the default);
* ``fresh`` -- the same with outputs from numpy's allocator (``memory.pool(min_bytes=...)``
  set beyond every size, so freed blocks go back to glibc);

interleaved (each repetition times every implementation once) in this process, and again
``numpy`` and ``fresh`` in a second process started with ``NUMFUSE_RETAIN_MEMORY=1``
(``retain``: glibc keeps freed blocks; it cannot be undone within a process).  Ratios are
numpy's median ÷ the implementation's, both from the same process.

**Peak** (``--peak``): peak memory of one call measured with tracemalloc (numpy reports
its array allocations to it), minus the size of its results: the memory spent on
temporaries.  Workloads: logp/grad and ``sum((x - mu) ** 2)``.

    python benchmarks/bench_memory.py [--sizes 1e5,1e6,1e7] [--repeats 15] [--write]
    python benchmarks/bench_memory.py --peak [--size 1e6]

``--write`` writes benchmarks/results/memory.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from workloads import WORKLOADS

import numfuse
from numfuse import memory

RESULTS = Path(__file__).parent / "results"
NAMES = ("logp_grad", "black_scholes")
BATCH_SECONDS = 5e-3  # each timing covers at least this much work


# ---------------------------------------------------------------------------- speed


DEFAULT_MIN_BYTES = memory.pool().min_bytes  # the pool's threshold as imported

def batch_time(function: Callable[..., Any], args: tuple, calls: int) -> float:
    """Seconds per call over ``calls`` calls, each result kept until the next replaces it."""
    result = function(*args)
    start = time.perf_counter()
    for _ in range(calls):
        result = function(*args)
    elapsed = time.perf_counter() - start
    del result
    return elapsed / calls


def timed(implementations: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Median seconds per call of each implementation, repetitions interleaved."""
    samples: dict[str, list[float]] = {name: [] for name in implementations}
    for _ in range(repeats):
        for name, run in implementations.items():
            samples[name].append(run())
    return {name: statistics.median(values) for name, values in samples.items()}


def speed(sizes: list[int], repeats: int, modes: tuple[str, ...]) -> dict[str, Any]:
    """{workload: {size: {implementation: median seconds}}} for this process."""
    workloads = {workload.name: workload for workload in WORKLOADS}
    rng = np.random.default_rng(0)
    table: dict[str, Any] = {}
    for name in NAMES:
        workload = workloads[name]
        reference = workload.build(np)
        jitted = numfuse.jit(reference, threads=1)
        table[name] = {}
        for size in sizes:
            args = workload.make_args(size, rng)
            expected, actual = reference(*args), jitted(*args)
            for want, got in zip(expected, actual, strict=True):
                np.testing.assert_allclose(got, want, rtol=workload.rtol,
                                           atol=workload.rtol * np.max(np.abs(want)))
            once = batch_time(reference, args, 1)
            calls = max(1, int(BATCH_SECONDS / max(once, 1e-7)))

            def pooled(on: bool, jitted: Any = jitted, args: tuple = args,
                       calls: int = calls) -> float:
                memory.pool(min_bytes=DEFAULT_MIN_BYTES if on else 1 << 62)
                return batch_time(jitted, args, calls)

            runs: dict[str, Callable[[], float]] = {
                "numpy": lambda reference=reference, args=args, calls=calls:
                    batch_time(reference, args, calls)}
            if "pool" in modes:
                runs["pool"] = lambda: pooled(True)
            runs["fresh"] = lambda: pooled(False)
            table[name][size] = timed(runs, repeats)
            memory.pool(min_bytes=DEFAULT_MIN_BYTES)
            memory.release_pool()
    return table


def retained(sizes: list[int], repeats: int) -> dict[str, Any]:
    """``speed`` of numpy and fresh outputs in a new process keeping freed memory."""
    env = {**os.environ, "NUMFUSE_RETAIN_MEMORY": "1"}
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
            "import json, bench_memory as b; "
            f"print(json.dumps(b.speed({sizes!r}, {repeats}, ('numpy', 'fresh'))))")
    output = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True).stdout
    loaded = json.loads(output.strip().splitlines()[-1])
    return {name: {int(size): row for size, row in rows.items()} for name, rows in loaded.items()}


def speed_report(sizes: list[int], repeats: int) -> str:
    load = os.getloadavg()[0]
    here = speed(sizes, repeats, ("numpy", "pool", "fresh"))
    kept = retained(sizes, repeats)
    lines = [
        "# Memory pool: numfuse with its result blocks reused, fresh, and glibc retaining",
        "",
        f"* {platform.machine()}, {os.cpu_count()} logical cores, Python "
        f"{platform.python_version()}, numpy {np.__version__}; numfuse `threads=1`",
        f"* load average (1 min) {load:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
        f"{repeats} interleaved repetitions, medians",
        "",
        "Time per call, each call's results kept until the next call replaces them; in "
        "brackets the speed-up over numpy measured in the same process (numpy's median ÷ "
        "the implementation's). *pool*: numfuse's default (outputs of "
        f"{DEFAULT_MIN_BYTES >> 10} KiB and more "
        "from its pool); *fresh*: numfuse with outputs from numpy's allocator; *retain*: "
        "numfuse with fresh outputs in a process started with `NUMFUSE_RETAIN_MEMORY=1` "
        "(glibc keeps freed blocks for every allocation, numpy's included: its numpy "
        "column is that process's). *pool ÷ fresh*: fresh median ÷ pool median.",
        "",
    ]
    for name in NAMES:
        lines += [f"## {name}", "",
                  "| n | numpy | pool | fresh | pool ÷ fresh | numpy (retain) | retain |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for size in sizes:
            row, other = here[name][size], kept[name][size]
            lines.append(
                f"| {size:.0e} | {_ms(row['numpy'])} | {_cell(row['pool'], row['numpy'])} | "
                f"{_cell(row['fresh'], row['numpy'])} | {row['fresh'] / row['pool']:.2f}x | "
                f"{_ms(other['numpy'])} | {_cell(other['fresh'], other['numpy'])} |")
        lines.append("")
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def _cell(seconds: float, numpy: float) -> str:
    return f"{_ms(seconds)} ({numpy / seconds:.2f}x)"


# ----------------------------------------------------------------------------- peak


def logp_and_grad(x: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    d = x - mu
    return -(d**2) / 2, -d


def sum_of_squares(x: np.ndarray, mu: float) -> np.floating:
    return np.sum((x - mu) ** 2)


def peak_bytes(function: Callable[..., Any], *args: Any) -> tuple[int, int]:
    """(peak bytes allocated during one call, bytes of what it returned), with numfuse's
    memory pool off: tracemalloc sees numpy's allocations, not the pool's mappings."""
    settings = memory.pool()
    memory.pool(enabled=False)
    try:
        function(*args)  # compile / warm up outside the measurement
        tracemalloc.start()
        tracemalloc.reset_peak()
        result = function(*args)
        _current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        memory.pool(enabled=settings.enabled)
    results = result if isinstance(result, tuple) else (result,)
    kept = sum(np.asarray(item).nbytes for item in results)
    return peak, kept


def peak_report(size: int) -> str:
    x = np.random.default_rng(0).standard_normal(size)
    rows = ["| workload | implementation | peak | results | temporaries (peak - results) |",
            "|---|---|---:|---:|---:|"]
    for workload in (logp_and_grad, sum_of_squares):
        for name, function in (("numpy", workload), ("numfuse", numfuse.jit(workload))):
            peak, kept = peak_bytes(function, x, 0.25)
            rows.append(f"| {workload.__name__} | {name} | {peak / 1e6:.1f} MB | "
                        f"{kept / 1e6:.1f} MB | {(peak - kept) / 1e6:.1f} MB |")
    return f"n = {size:,} float64 ({x.nbytes / 1e6:.1f} MB per array)\n\n" + "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peak", action="store_true", help="peak memory instead of speed")
    parser.add_argument("--size", type=float, default=1e6, help="elements, with --peak")
    parser.add_argument("--sizes", default="1e5,1e6,1e7")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--write", action="store_true", help="write results/memory.md")
    options = parser.parse_args()
    if options.peak:
        print(peak_report(int(options.size)))
        return
    sizes = [int(float(size)) for size in options.sizes.split(",")]
    report = speed_report(sizes, options.repeats)
    report += "\n## Peak memory of one call (tracemalloc, pool off)\n\n" + \
        peak_report(sizes[len(sizes) // 2]) + "\n"
    print(report)
    if options.write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "memory.md").write_text(report)


if __name__ == "__main__":
    main()
