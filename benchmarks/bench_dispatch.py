"""Per-call dispatch: a ``numfuse.jit`` call against a raw call of its kernel's gufunc.

For every workload of the suite (``workloads.py``) at small sizes (1e2, 1e3, 1e4), three
implementations are timed interleaved (``suite.measure``: round-robin repetitions with a
rotating start, short calls batched, medians):

* ``numpy`` -- the function itself;
* ``numfuse`` -- ``numfuse.jit`` of it, called as users call it (argument checks, the
  signature and call caches, the thread decision, the kernel call, assembly of results);
* ``raw gufunc`` -- the compiled kernel's numpy gufunc called directly on the operands as
  the program presents them (prepared once, outside the timing; the same arrays as the
  arguments for these workloads), outputs allocated by the gufunc: the floor a call of
  numfuse can reach.  A fused reduction comes back as the gufunc's partial, not completed.
  Programs of more than one step have no such floor ("—");
* ``numfuse out=`` and ``raw gufunc out=`` -- the same two calls writing into arrays
  given with ``out=`` (allocated once), for workloads whose results are arrays.

Reported: ``numfuse ÷ raw gufunc`` (the dispatch overhead as a factor; the target is at
most 1.3 at 1e3), the same with ``out=``, and ``numpy ÷ numfuse`` (above 1: numfuse is
faster than numpy).

Run:  python benchmarks/bench_dispatch.py [--sizes 1e2,1e3,1e4] [--repeats 31]
Writes benchmarks/results/dispatch.md (``--output`` for another file).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from suite import (
    Cell,
    Implementation,
    check,
    environment,
    format_time,
    measure,
    seconds_per_call,
    size_label,
)
from workloads import WORKLOADS, Workload

import numfuse

SIZES = (10**2, 10**3, 10**4)
RESULTS = Path(__file__).parent / "results"
ORDER = ("numpy", "numfuse", "raw", "numfuse_out", "raw_out")
LABELS = {"numpy": "numpy", "numfuse": "numfuse", "raw": "raw gufunc",
          "numfuse_out": "numfuse out=", "raw_out": "raw gufunc out="}


def raw_gufunc(jitted, args: tuple) -> tuple[Callable, tuple] | None:
    """The kernel's gufunc and its operands as the program presents them for ``args``, or
    None when the program is not a single kernel step."""
    compiled, operands = jitted.specialize(*args)
    program = compiled.program
    if len(program.steps) != 1 or not hasattr(program.steps[0], "ufunc"):
        return None
    step = program.steps[0]
    values = [*operands, *program.initial]
    presented = tuple(values[slot] if prepare is None else prepare(values[slot])
                      for slot, prepare, _core in step.operands.operands)
    return step.ufunc, presented


def run_one(workload: Workload, size: int, options, rng: np.random.Generator
            ) -> dict[str, Cell]:
    reference = workload.build(np)
    jitted = numfuse.jit(reference)
    args = workload.make_args(size, rng)
    expected = reference(*args)
    check(workload, jitted(*args), expected)
    impls = {"numpy": Implementation("numpy", reference),
             "numfuse": Implementation("numfuse", jitted)}
    converted: dict[str, tuple] = {"numpy": args, "numfuse": args}
    raw = raw_gufunc(jitted, args)
    if raw is not None:
        impls["raw"] = Implementation("raw", raw[0])
        converted["raw"] = raw[1]
    results = expected if isinstance(expected, tuple) else (expected,)
    if all(isinstance(result, np.ndarray) and result.ndim for result in results):
        outs = tuple(np.empty_like(result) for result in results)
        out = outs if isinstance(expected, tuple) else outs[0]
        impls["numfuse_out"] = Implementation(
            "numfuse_out", lambda *values: jitted(*values, out=out))
        converted["numfuse_out"] = args
        if raw is not None:
            gufunc = raw[0]
            impls["raw_out"] = Implementation(
                "raw_out", lambda *values: gufunc(*values, out=outs))
            converted["raw_out"] = raw[1]
    cells = {name: Cell() for name in impls}
    batch = {name: max(1, math.ceil(options.min_sample / seconds_per_call(
                 impl.call, converted[name], at_least=0.01, most=100_000)))
             for name, impl in impls.items()}
    measure(impls, converted, cells, batch, options.repeats)
    return cells


def ratio(cells: dict[str, Cell], top: str, bottom: str) -> float:
    if top not in cells or bottom not in cells:
        return math.nan
    return cells[top].median / cells[bottom].median


def ratio_text(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}"


def table(results: dict[str, dict[int, dict[str, Cell]]], sizes: list[int]) -> list[str]:
    lines = ["| workload | n | numpy | numfuse | raw gufunc | numfuse out= | raw gufunc out= "
             "| numfuse ÷ raw gufunc | numfuse out= ÷ raw gufunc out= | numpy ÷ numfuse |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, by_size in results.items():
        for size in sizes:
            cells = by_size[size]
            times = [format_time(cells[impl].median) if impl in cells else "—"
                     for impl in ORDER]
            lines.append(f"| {name} | {size_label(size)} | " + " | ".join(times) + " | "
                         f"{ratio_text(ratio(cells, 'numfuse', 'raw'))} | "
                         f"{ratio_text(ratio(cells, 'numfuse_out', 'raw_out'))} | "
                         f"{ratio_text(ratio(cells, 'numpy', 'numfuse'))} |")
    return lines


def summary(results: dict[str, dict[int, dict[str, Cell]]], sizes: list[int]) -> list[str]:
    def matrix(top: str, bottom: str) -> list[str]:
        lines = ["| workload | " + " | ".join(size_label(size) for size in sizes) + " |",
                 "|---|" + "---:|" * len(sizes)]
        for name, by_size in results.items():
            lines.append(f"| {name} | " + " | ".join(
                ratio_text(ratio(by_size[size], top, bottom)) for size in sizes) + " |")
        return lines

    return ["### numfuse ÷ raw gufunc (dispatch overhead; target ≤ 1.3 at 1e3)", "",
            *matrix("numfuse", "raw"), "",
            "### numfuse out= ÷ raw gufunc out= (the same, writing into given arrays)", "",
            *matrix("numfuse_out", "raw_out"), "",
            "### numpy ÷ numfuse (above 1: numfuse faster than numpy)", "",
            *matrix("numpy", "numfuse"), ""]


def report(results: dict[str, dict[int, dict[str, Cell]]], sizes: list[int], options,
           seconds: float) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    return "\n".join([
        "# Dispatch: a numfuse call against a raw call of its gufunc", "",
        f"Median time per call over {options.repeats} interleaved repetitions "
        "(`python benchmarks/bench_dispatch.py`; each repetition times every "
        f"implementation once, round-robin, calls batched to at least "
        f"{options.min_sample * 1e3:.0f} ms per sample); took {seconds:.0f} s, load average "
        f"(1 min) {load:.2f} at the end.", "",
        *environment(), "",
        *summary(results, sizes),
        "### Times", "",
        *table(results, sizes), ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=None, help="comma-separated, e.g. 1e2,1e3")
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--min-sample", type=float, default=0.002)
    parser.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS))
    parser.add_argument("--output", default=str(RESULTS / "dispatch.md"))
    options = parser.parse_args()
    sizes = sorted(int(float(size)) for size in options.sizes.split(",")) \
        if options.sizes else list(SIZES)
    chosen = [w for w in WORKLOADS if w.name in options.workloads.split(",")]
    rng = np.random.default_rng(0)
    results: dict[str, dict[int, dict[str, Cell]]] = {w.name: {} for w in chosen}
    start = time.perf_counter()
    for size in sizes:
        for workload in chosen:
            cells = run_one(workload, size, options, rng)
            results[workload.name][size] = cells
            print(f"{workload.name} {size_label(size)}: " + ", ".join(
                f"{LABELS[name]} {format_time(cell.median)}" for name, cell in cells.items()),
                flush=True)
    text = report(results, sizes, options, time.perf_counter() - start)
    Path(options.output).parent.mkdir(exist_ok=True)
    Path(options.output).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
