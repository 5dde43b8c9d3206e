"""Compile time, and what the disk cache saves: cold compiles and warm first calls.

Every measurement runs in a fresh Python process (the disk cache is what carries kernels
from one process to the next) with its own ``NUMFUSE_CACHE_DIR``; the time is taken inside
that process after ``import numfuse`` (the import is excluded and reported separately):

* ``logp/grad, cold`` -- ``d = x - mu; return -(d**2)/2, -d`` on an empty cache: the first
  call of the jitted function, including numba's one-time setup of its compiler in the
  process (loading its typing and lowering registries);
* ``logp/grad, cold, compiler warmed`` -- the same in a process that has already compiled
  another function, so only this kernel's own compile is timed;
* ``logp/grad, warm`` -- a fresh process, the cache filled by an earlier one: the first call,
  which loads the kernel from disk (checked: the compile event says ``from_cache``);
* ``numba runtime setup`` -- for reference: what loading any numba-compiled code from its
  cache costs a fresh process at least (numba's target context and its runtime, NRT, whose
  functions numba compiles in every process);
* ``1,500-node graph, cold / warm`` -- ``numfuse.compile`` of a seeded random elementwise
  program (benchmarks/bench_partition.py's generator: four arguments of shapes ``(n,)``,
  ``(n,1)``, ``(1,n)``, ``(n,n)``, 1,500 operations) on an empty and on a filled cache.

Cold and warm runs alternate; each row is the median of its repetitions (one for the
1,500-node cold compile, which takes about a minute).  Results are printed and written to
``benchmarks/results/compile.md``.

Run:  python benchmarks/bench_compile.py [--repeats 5] [--graph-ops 1500] [--no-graph]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "compile.md"

PRELUDE = """
import json, sys, time
start = time.perf_counter()
import numpy as np
import numfuse
from numfuse import hooks
imported = time.perf_counter()
"""

LOGP_GRAD = PRELUDE + """
warm_up = {warm_up}
if warm_up:                       # another function first: numba's compiler is set up
    numfuse.jit(lambda v: v * 0.5 + 3.0)(np.ones(4))
x = np.random.default_rng(0).standard_normal(1000)
with hooks.recording() as events:
    begin = time.perf_counter()
    logp_and_grad = numfuse.jit(lambda x, mu: (-((x - mu) ** 2) / 2, -(x - mu)))
    logp, grad = logp_and_grad(x, 0.25)
    first = time.perf_counter() - begin
assert np.array_equal(grad, -(x - 0.25)) and np.array_equal(logp, -((x - 0.25) ** 2) / 2)
print(json.dumps({{"seconds": first, "import": imported - start,
                   "from_cache": [event.from_cache for event in events]}}))
"""

NUMBA_SETUP = PRELUDE + """
from numba.core.registry import cpu_target
from numba.core.runtime import rtsys
begin = time.perf_counter()
rtsys.initialize(cpu_target.target_context)
print(json.dumps({"seconds": time.perf_counter() - begin, "import": imported - start,
                  "from_cache": []}))
"""

GRAPH = PRELUDE + """
sys.path.insert(0, {benchmarks!r})
from bench_partition import EXAMPLES, random_program
program = random_program({ops}, 0)
with hooks.recording() as events:
    begin = time.perf_counter()
    compiled = numfuse.compile(program, *EXAMPLES)
    seconds = time.perf_counter() - begin
print(json.dumps({{"seconds": seconds, "import": imported - start,
                   "kernels": len(compiled.kernels), "nodes": len(compiled.graph.nodes),
                   "from_cache": [event.from_cache for event in events]}}))
"""


def run(code: str, cache_dir: Path) -> dict:
    environment = {**os.environ, "NUMFUSE_CACHE_DIR": str(cache_dir),
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                             env=environment, capture_output=True, text=True, check=False)
    if process.returncode != 0:
        raise RuntimeError(process.stderr)
    return json.loads(process.stdout.strip().splitlines()[-1])


def measure(repeats: int, graph_ops: int | None, work: Path) -> list[dict]:
    """Rows of (case, median seconds, repetitions, detail), cold and warm interleaved."""
    samples: dict[str, list[dict]] = {}

    def record(case: str, result: dict) -> None:
        samples.setdefault(case, []).append(result)

    for repeat in range(repeats):
        cold = work / f"logp-{repeat}"
        record("logp/grad, cold", run(LOGP_GRAD.format(warm_up=False), cold))
        record("logp/grad, warm", run(LOGP_GRAD.format(warm_up=False), cold))
        record("logp/grad, cold, compiler warmed",
               run(LOGP_GRAD.format(warm_up=True), work / f"logp-warmed-{repeat}"))
        record("numba runtime setup", run(NUMBA_SETUP, work / "unused"))
    if graph_ops:
        graph = GRAPH.format(benchmarks=str(HERE), ops=graph_ops)
        record(f"{graph_ops:,}-node graph, cold", run(graph, work / "graph"))
        for _ in range(max(1, repeats // 2)):
            record(f"{graph_ops:,}-node graph, warm", run(graph, work / "graph"))
    return [summarise(case, results) for case, results in samples.items()]


def summarise(case: str, results: list[dict]) -> dict:
    loaded = {tuple(result["from_cache"]) for result in results}
    detail = []
    if "kernels" in results[0]:
        detail.append(f"{results[0]['kernels']} kernels, {results[0]['nodes']} graph nodes")
    if loaded and loaded != {()}:
        flags = {flag for flags in loaded for flag in flags}
        detail.append("loaded from disk" if flags == {True} else
                      "compiled" if flags == {False} else "mixed")
    return {"case": case, "seconds": statistics.median(r["seconds"] for r in results),
            "repeats": len(results), "import": statistics.median(r["import"] for r in results),
            "detail": "; ".join(detail)}


def readable(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def environment() -> str:
    import llvmlite
    import numba
    import numpy

    try:
        revision = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                                  capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        revision = "unknown"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} "
            f"CPUs (load average {load}); numpy {numpy.__version__}, numba {numba.__version__}"
            f", llvmlite {llvmlite.__version__}; numfuse git {revision}")


def report(rows: list[dict], header: str) -> str:
    lines = [
        "# Compile time and the disk cache",
        "",
        header,
        "",
        "Seconds inside a fresh process after `import numfuse` (median of the repetitions); "
        "see `benchmarks/bench_compile.py` for what each case does.",
        "",
        "| case | time | repetitions | import (excluded) | notes |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [f"| {row['case']} | {readable(row['seconds'])} | {row['repeats']} | "
              f"{readable(row['import'])} | {row['detail']} |" for row in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--graph-ops", type=int, default=1500)
    parser.add_argument("--no-graph", action="store_true", help="skip the large graph")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="numfuse-bench-compile-") as work:
        rows = measure(options.repeats, None if options.no_graph else options.graph_ops,
                       Path(work))
    text = report(rows, environment())
    print(text)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
