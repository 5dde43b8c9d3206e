"""Do threads ever lose? numfuse with its default threads against ``threads=1``.

For every workload of the suite and every size, two jitted copies of the same function
(default threads, and ``threads=1``) are timed interleaved, in three situations:

* **fresh** -- the sizes in increasing order, each copy warmed up at that size only;
* **after large calls** -- both copies first called at the largest size (so a cost per
  element learnt there could mislead a policy at other sizes), then the sizes in
  decreasing order;
* **one core busy** -- as *after large calls*, while another process keeps one core
  spinning.

The ratio reported is ``threads=1`` median ÷ default median (above 1: splitting helps;
the target is at least 0.95 everywhere).  Then ``sum_squares`` (a fused reduction, split
over threads in fixed chunks) against a hand-written ``numba.prange`` loop, both on all
threads, at the sizes from 1e5: prange median ÷ numfuse median (target ≥ 0.9 at 1e7).

Run:  python benchmarks/bench_threads.py [--sizes 1e4,1e5,1e6] [--repeats 15]
Writes benchmarks/results/threads.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os

# numba's OpenMP workers spin after each parallel call unless told otherwise, slowing
# whatever is timed next on a 2-core machine.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from workloads import WORKLOADS, Workload

import numfuse

RESULTS = Path(__file__).parent / "results"
SITUATIONS = ("fresh", "after large calls", "one core busy")


def _spin(stop: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    while not stop.is_set():
        for _ in range(100_000):
            pass


def sample(call: Callable[[], object], min_seconds: float) -> float:
    """Seconds per call, batching calls so one sample lasts at least ``min_seconds``."""
    count = 1
    while True:
        start = time.perf_counter()
        for _ in range(count):
            call()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / count
        count *= 2


def compare(workload: Workload, sizes: list[int], repeats: int, warm_largest: bool,
            min_seconds: float) -> dict[int, float]:
    """threads=1 median ÷ default-threads median at each size."""
    reference = workload.build(np)
    default, single = numfuse.jit(reference), numfuse.jit(reference, threads=1)
    rng = np.random.default_rng(0)
    arguments = {size: workload.make_args(size, rng) for size in sizes}
    if warm_largest:
        largest = arguments[max(sizes)]
        for _ in range(3):
            default(*largest)
            single(*largest)
    ratios = {}
    for size in sorted(sizes, reverse=warm_largest):
        args = arguments[size]
        for _ in range(3):
            default(*args)
            single(*args)
        times: dict[str, list[float]] = {"default": [], "single": []}
        for repeat in range(repeats):
            order = (("default", default), ("single", single))
            for name, jitted in order if repeat % 2 == 0 else order[::-1]:
                times[name].append(sample(lambda jitted=jitted, args=args: jitted(*args),
                                          min_seconds))
        ratios[size] = statistics.median(times["single"]) / statistics.median(times["default"])
    return ratios


def against_prange(sizes: list[int], repeats: int, min_seconds: float) -> dict[int, float]:
    """prange-loop median ÷ numfuse (default threads) median for ``sum((x - mu)**2)``."""
    workload = next(w for w in WORKLOADS if w.name == "sum_squares")
    jitted, prange_loop = numfuse.jit(workload.build(np)), workload.parallel_loop
    assert prange_loop is not None
    rng = np.random.default_rng(0)
    ratios = {}
    for size in sizes:
        x, mu = workload.make_args(size, rng)
        calls = {"numfuse": lambda x=x, mu=mu: jitted(x, mu),
                 "prange": lambda x=x, mu=mu: prange_loop(x, mu)}
        for call in calls.values():
            for _ in range(3):
                call()
        times: dict[str, list[float]] = {name: [] for name in calls}
        for repeat in range(repeats):
            order = list(calls.items())
            for name, call in order if repeat % 2 == 0 else order[::-1]:
                times[name].append(sample(call, min_seconds))
        ratios[size] = statistics.median(times["prange"]) / statistics.median(times["numfuse"])
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e3,1e4,1e5,1e6,1e7")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.002)
    parser.add_argument("--workloads", default="")
    parser.add_argument("--output", default=str(RESULTS / "threads.md"))
    options = parser.parse_args()
    sizes = [int(float(size)) for size in options.sizes.split(",")]
    chosen = [w for w in WORKLOADS if not options.workloads
              or w.name in options.workloads.split(",")]
    results: dict[str, dict[str, dict[int, float]]] = {}
    started = time.perf_counter()
    for workload in chosen:
        results[workload.name] = {}
        for situation in SITUATIONS:
            stop = multiprocessing.Event()
            spinner = None
            if situation == "one core busy":
                spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
                spinner.start()
            try:
                results[workload.name][situation] = compare(
                    workload, sizes, options.repeats, situation != "fresh", options.min_sample)
            finally:
                stop.set()
                if spinner is not None:
                    spinner.join()
            print(workload.name, situation, {size: round(ratio, 2) for size, ratio in
                                             results[workload.name][situation].items()},
                  flush=True)
    lines = ["# Threads: default against threads=1", "",
             f"* {os.cpu_count()} logical cores; load average at end "
             f"{os.getloadavg()[0]:.2f}; took {time.perf_counter() - started:.0f} s",
             f"* numfuse {numfuse.__version__}, numpy {np.__version__}", "",
             "threads=1 median ÷ default median (above 1: the default's splitting helps; "
             "target ≥ 0.95). Interleaved repetitions, medians.", ""]
    header = "| workload | situation | " + " | ".join(f"{size:.0e}" for size in sizes) + " |"
    lines += [header, "|---|---|" + "---:|" * len(sizes)]
    worst = min(ratio for by_situation in results.values() for by_size in
                by_situation.values() for ratio in by_size.values())
    for name, by_situation in results.items():
        for situation, by_size in by_situation.items():
            cells = " | ".join(f"{by_size[size]:.2f}" for size in sizes)
            lines.append(f"| {name} | {situation} | {cells} |")
    lines += ["", f"Lowest ratio: {worst:.2f}."]
    large = [size for size in sizes if size >= 100_000]
    if large and any(w.name == "sum_squares" for w in chosen):
        prange = against_prange(large, options.repeats, options.min_sample)
        print("prange ÷ numfuse", {size: round(ratio, 2) for size, ratio in prange.items()})
        lines += ["", "## sum_squares against a hand-written prange loop", "",
                  "prange median ÷ numfuse median, both on all threads (above 1: numfuse "
                  "is faster; target ≥ 0.9 at 1e7).", "",
                  "| " + " | ".join(f"{size:.0e}" for size in large) + " |",
                  "|" + "---:|" * len(large),
                  "| " + " | ".join(f"{prange[size]:.2f}" for size in large) + " |"]
    Path(options.output).parent.mkdir(parents=True, exist_ok=True)
    Path(options.output).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
