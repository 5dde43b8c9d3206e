"""Compile time: numfuse's first call against jax.jit and torch.compile, and the disk cache.

Every measurement runs in a fresh Python process with its own empty temporary cache
directory -- ``NUMFUSE_CACHE_DIR``, and for torch ``TORCHINDUCTOR_CACHE_DIR``,
``TRITON_CACHE_DIR`` and ``TMPDIR`` (where torch keeps its precompiled C++ header) -- except
the warm runs, which reuse the directory an earlier process filled, right after it.  The
time is taken inside the process after its imports (numpy and the compiler's library),
which are timed and reported separately.  Each figure is the median of its repetitions.

* **Cold first call by program size** -- a seeded random program of N elementwise
  operations (N = 10, 100, 300, 1000, 3000): a plain Python function of three float64
  arrays of 10,000 elements returning five arrays, generated as source text against an
  array module ``xp`` (``xp.tanh(v3)``, ``0.5 * (v1 + v7)``, ``xp.where(v2 > v5, v5, v2 * v5)``
  ...).  Each statement mostly reads recent values and sometimes an older one (fan-out);
  every value reaches an output, and every value stays within [-1, 1] (no inf or NaN).
  Operations are counted in the source: each ufunc call and each operator is one.  The
  same text is compiled by

  - ``numfuse``: ``xp = numpy``, ``numfuse.jit(program)(x, y, z)``; the kernels it compiles
    are counted from its compile events, and its results are checked against numpy's;
  - ``jax.jit``: ``xp = jax.numpy`` (64-bit enabled, inputs converted with ``jnp.asarray``
    before the clock starts), ``jax.jit(program)(x, y, z)`` and ``block_until_ready`` on
    every output;
  - ``torch.compile``: ``xp = numpy`` (torch.compile traces numpy code itself),
    ``torch.compile(program)(x, y, z)``.

  jax's and torch's results are checked against numpy's too (``np.allclose``, rtol 1e-12).
  A peer whose import fails is "not installed"; a run longer than ``--timeout`` is
  "timeout", and the peer is not run on larger programs.
* **Warm cache** -- ``numfuse``'s first call of the 1,000-operation program (``--warm-ops``)
  and of logp/grad in a fresh process whose cache an earlier process filled (checked: every
  compile event says ``from_cache``).
* **logp/grad** -- ``lambda x, mu: (-((x - mu) ** 2) / 2, -(x - mu))`` on 1,000 float64:
  cold (the first numfuse compile of the process, so it includes the code generator's
  one-time setup), cold with the compiler warmed (the process has compiled another function
  first, so only this kernel's compile is timed) and warm.
* **1,500-node graph** -- ``numfuse.compile`` of ``bench_partition.random_program(1500, 0)``
  (four arguments of loop shapes ``(n,)``, ``(n,1)``, ``(1,n)``, ``(n,n)``), cold and warm.
* **Partition of 20,000 operations** -- only ``numfuse.partition.partition`` of
  ``bench_partition``'s 20,000-operation graph (median of its repetitions in one process).

Programs up to 300 operations and the other cases get ``--repeats`` repetitions (default
3); larger programs and the 1,500-node cold compile get ``--large-repeats`` (default 1).
The markdown is printed and written to ``benchmarks/results/compile.md``, and a log-log
plot of time against operations to ``benchmarks/results/compile.png`` (skipped without
matplotlib).  Progress goes to stderr.

Run:  python benchmarks/bench_compile.py            # all of it: long (up to --timeout a process)
      python benchmarks/bench_compile.py --quick    # smoke test: sizes 10,100, one repetition,
                                                    # no 1,500-node graph (about a minute)
      python benchmarks/bench_compile.py --sizes 10,100,300 --peers numfuse,jax --no-graph
Options: --sizes, --peers (numfuse,jax,torch), --repeats, --large-repeats, --timeout
(seconds per process, default 900), --warm-ops, --graph-ops, --no-graph, --seed.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib.metadata
import json
import math
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from machine import cpu_model, revision

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"

SIZES = (10, 100, 300, 1000, 3000)
QUICK_SIZES = (10, 100)
LARGE = 300  # programs above this many operations get --large-repeats repetitions
PEERS = ("numfuse", "jax", "torch")
LABELS = {"numfuse": "numfuse", "jax": "jax.jit", "torch": "torch.compile"}
ELEMENTS = 10_000
OUTPUTS = 5
PARTITION_OPS = 20_000
RTOL = 1e-12

# Statement templates over operands {a} and {b}, each with the number of operations it
# applies.  Every template maps values in [-1, 1] into [-1, 1].
UNARY = (("xp.tanh({a})", 1), ("xp.sin({a})", 1), ("xp.cos({a})", 1),
         ("xp.exp(-xp.abs({a}))", 3), ("xp.log1p(xp.abs({a}))", 2),
         ("xp.sqrt(xp.abs({a}))", 2))
BINARY = (("{a} * {b}", 1), ("xp.maximum({a}, {b})", 1), ("xp.minimum({a}, {b})", 1),
          ("0.5 * ({a} + {b})", 2), ("0.5 * ({a} - {b})", 2),
          ("{a} / (1.0 + {b} * {b})", 3), ("xp.where({a} > {b}, {b}, {a} * {b})", 3))
COLLECTORS = tuple(template for template in BINARY if template[1] == 1)


# --------------------------------------------------------------------- the programs

def program_source(n_ops: int, seed: int) -> str:
    """Source of ``def program(x, y, z)`` applying exactly ``n_ops`` elementwise operations.

    The last ``OUTPUTS`` statements are the outputs; each reads the oldest values nothing
    has read yet.  Before them, a statement is forced to read the two oldest unread values
    whenever they could otherwise outnumber what the last statements can read, so every
    value reaches an output and no operation is dead code.
    """
    if n_ops < 2 * OUTPUTS:
        raise ValueError(f"a program needs at least {2 * OUTPUTS} operations")
    rng = random.Random(seed)
    values = ["x", "y", "z"]
    unread = dict.fromkeys(values)  # insertion-ordered: the oldest first
    lines = []

    def recent(exclude: str | None = None) -> str:
        choices = [value for value in values if value != exclude]
        return choices[len(choices) - 1 - min(int(rng.expovariate(0.5)), len(choices) - 1)]

    def other(first: str) -> str:
        """Mostly a recent value; sometimes the oldest unread one, an input (which keeps
        the values from collapsing to constants) or any older one (fan-out)."""
        roll = rng.random()
        older = [value for value in unread if value != first]
        if roll < 0.15 and older:
            return older[0]
        if roll < 0.25:
            return rng.choice([value for value in ("x", "y", "z") if value != first])
        if roll < 0.3:
            return rng.choice([value for value in values if value != first])
        return recent(exclude=first)

    def statement(template: str, *operands: str) -> str:
        name = f"v{len(lines)}"
        for operand in operands:
            unread.pop(operand, None)
        lines.append(f"    {name} = {template.format(a=operands[0], b=operands[-1])}")
        return name

    budget = n_ops - OUTPUTS  # what the statements before the outputs may apply
    while budget:
        if len(unread) - budget > 2 * OUTPUTS - 4:  # 4: the most a free statement adds
            template, cost = rng.choice(COLLECTORS)
            oldest, second = list(unread)[:2]
            name = statement(template, oldest, second)
        else:
            unary = rng.random() < 0.4
            template, cost = rng.choice([entry for entry in (UNARY if unary else BINARY)
                                         if entry[1] <= budget])
            first = recent()
            name = statement(template, first) if unary else statement(template, first,
                                                                      other(first))
        values.append(name)
        unread[name] = None
        budget -= cost
    outputs = []
    for _ in range(OUTPUTS):
        first = next(iter(unread), None) or recent()
        second = next((value for value in unread if value != first), None) or \
            recent(exclude=first)
        outputs.append(statement(rng.choice(COLLECTORS)[0], first, second))
    assert not unread, "every value must reach an output"
    body = "\n".join(lines)
    return f"def program(x, y, z):\n{body}\n    return {', '.join(outputs)}\n"


def count_operations(source: str) -> int:
    """The ufunc calls and operators in ``source`` (the generated code calls nothing else)."""
    return sum(isinstance(node, ast.Call | ast.BinOp | ast.UnaryOp | ast.Compare)
               for node in ast.walk(ast.parse(source)))


def load_program(path: str, xp: Any) -> Callable[..., Any]:
    """The generated ``program`` of the file at ``path``, with ``xp`` as its array module."""
    namespace = {"xp": xp}
    exec(compile(Path(path).read_text(), path, "exec"), namespace)
    return namespace["program"]


# ------------------------------------------------------- inside the measured process

@dataclasses.dataclass
class Peer:
    """How one compiler runs a generated program."""

    xp: Any  # the array module the program is written against
    jit: Callable[[Callable[..., Any]], Callable[..., Any]]
    convert: Callable[[Any], Any] = lambda array: array  # before the clock starts
    finish: Callable[[Any], Any] = lambda outputs: outputs  # wait for the results
    recording: Callable[[], contextlib.AbstractContextManager[list[Any]]] = \
        lambda: contextlib.nullcontext([])  # collects compile events


def numfuse_peer() -> Peer:
    import numpy

    import numfuse

    return Peer(xp=numpy, jit=numfuse.jit, recording=numfuse.hooks.recording)


def jax_peer() -> Peer:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    return Peer(xp=jnp, jit=jax.jit, convert=jnp.asarray,
                finish=lambda outputs: [output.block_until_ready() for output in outputs])


def torch_peer() -> Peer:
    import numpy
    import torch

    return Peer(xp=numpy, jit=torch.compile)


PEER_SETUP = {"numfuse": numfuse_peer, "jax": jax_peer, "torch": torch_peer}


def program_child(peer_name: str, path: str, seed: int) -> dict:
    """First call of the program at ``path`` compiled by ``peer_name``."""
    began = time.perf_counter()
    try:
        peer = PEER_SETUP[peer_name]()
    except ImportError as error:
        return {"status": "not installed", "detail": str(error)}
    imported = time.perf_counter()
    import numpy as np

    inputs = np.random.default_rng(seed).uniform(-1.0, 1.0, (3, ELEMENTS))
    arguments = [peer.convert(array) for array in inputs]
    program = load_program(path, peer.xp)
    with peer.recording() as events:
        start = time.perf_counter()
        outputs = peer.finish(peer.jit(program)(*arguments))
        seconds = time.perf_counter() - start
    expected = load_program(path, np)(*inputs)
    matches = all(np.allclose(np.asarray(got), want, rtol=RTOL, equal_nan=True)
                  for got, want in zip(outputs, expected, strict=True))
    return {"status": "ok", "seconds": seconds, "import": imported - began,
            "matches": matches, "from_cache": [event.from_cache for event in events]}


def logp_grad(x: Any, mu: Any) -> tuple[Any, Any]:
    return -((x - mu) ** 2) / 2, -(x - mu)


def logp_grad_child(warm_up: bool) -> dict:
    """First call of ``numfuse.jit(logp_grad)``, after another function's if ``warm_up``."""
    began = time.perf_counter()
    import numpy as np

    import numfuse

    imported = time.perf_counter()
    if warm_up:
        numfuse.jit(lambda v: v * 0.5 + 3.0)(np.ones(4))
    x = np.random.default_rng(0).standard_normal(1000)
    with numfuse.hooks.recording() as events:
        start = time.perf_counter()
        logp, grad = numfuse.jit(logp_grad)(x, 0.25)
        seconds = time.perf_counter() - start
    want_logp, want_grad = logp_grad(x, 0.25)
    return {"status": "ok", "seconds": seconds, "import": imported - began,
            "matches": np.array_equal(logp, want_logp) and np.array_equal(grad, want_grad),
            "from_cache": [event.from_cache for event in events]}


def graph_child(ops: int) -> dict:
    """``numfuse.compile`` of bench_partition's random program of ``ops`` operations."""
    began = time.perf_counter()
    from bench_partition import EXAMPLES, random_program

    import numfuse

    imported = time.perf_counter()
    program = random_program(ops, 0)
    with numfuse.hooks.recording() as events:
        start = time.perf_counter()
        compiled = numfuse.compile(program, *EXAMPLES)
        seconds = time.perf_counter() - start
    return {"status": "ok", "seconds": seconds, "import": imported - began,
            "nodes": len(compiled.graph.nodes),
            "from_cache": [event.from_cache for event in events]}


def partition_child(ops: int) -> dict:
    """Median time of ``partition`` alone on bench_partition's graph of ``ops`` operations."""
    began = time.perf_counter()
    from bench_partition import REPEATS, build_graph, time_partition

    imported = time.perf_counter()
    graph = build_graph(ops)
    seconds, regions = time_partition(graph, REPEATS)
    return {"status": "ok", "seconds": seconds, "import": imported - began,
            "repeats": REPEATS, "nodes": len(graph.nodes), "regions": regions}


CHILDREN: dict[str, Callable[..., dict]] = {
    "program": program_child, "logp_grad": logp_grad_child, "graph": graph_child,
    "partition": partition_child,
}


# ----------------------------------------------------------- running the processes

def run(spec: dict, cache: Path, timeout: float) -> dict:
    """Run ``CHILDREN[spec["kind"]]`` in a fresh process whose caches are in ``cache``.

    ``TMPDIR`` points there too: torch keeps its precompiled C++ header in the system
    temporary directory, so without it torch's compile would not be cold."""
    (cache / "tmp").mkdir(parents=True, exist_ok=True)
    environment = {
        **os.environ,
        "NUMFUSE_CACHE_DIR": str(cache),
        "TORCHINDUCTOR_CACHE_DIR": str(cache / "torchinductor"),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "TMPDIR": str(cache / "tmp"),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child",
                                json.dumps(spec)], cwd=REPO, env=environment, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)  # its own group: a timeout ends all
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return {"status": "timeout", "detail": f"over {timeout:g} s"}
    if process.returncode != 0:
        lines = stderr.strip().splitlines() or [f"exit status {process.returncode}"]
        return {"status": "error", "detail": lines[-1]}
    return json.loads(stdout.strip().splitlines()[-1])


@dataclasses.dataclass
class Runner:
    """Runs the cases and keeps every result, by case, in the order they ran."""

    work: Path
    timeout: float
    results: dict[tuple[Any, ...], list[dict]] = dataclasses.field(default_factory=dict)

    def run(self, case: tuple[Any, ...], spec: dict, cache: str | None = None) -> dict:
        """Run ``spec`` in a fresh process.  ``cache`` names a cache directory kept for
        the warm runs that follow; without it the process gets an empty one, removed
        afterwards (torch's takes about 150 MB)."""
        if cache is None:
            with tempfile.TemporaryDirectory(dir=self.work, ignore_cleanup_errors=True) as empty:
                result = run(spec, Path(empty), self.timeout)
        else:
            result = run(spec, self.work / cache, self.timeout)
        shown = f"{result['seconds']:.3f} s" if result["status"] == "ok" else result["status"]
        print(f"  {' '.join(map(str, case))}: {shown}", file=sys.stderr, flush=True)
        return self.record(case, result)

    def record(self, case: tuple[Any, ...], result: dict) -> dict:
        self.results.setdefault(case, []).append(result)
        return result


def repeats_for(size: int, options: argparse.Namespace) -> int:
    return options.repeats if size <= LARGE else options.large_repeats


def warm_runs(options: argparse.Namespace, fills: int) -> int:
    """Warm runs after each cold run that fills a cache, about ``--repeats`` in all."""
    return math.ceil(options.repeats / fills)


def cold_then_warm(runner: Runner, cold_case: tuple[Any, ...], warm_case: tuple[Any, ...],
                   spec: dict, cache: str, warm: int) -> dict:
    """A cold run that fills ``cache``, then ``warm`` runs on it if the cold one succeeded."""
    cold = runner.run(cold_case, spec, cache)
    for _ in range(warm if cold["status"] == "ok" else 0):
        runner.run(warm_case, spec, cache)
    return cold


def measure_programs(runner: Runner, options: argparse.Namespace,
                     paths: dict[int, str]) -> None:
    """Cold runs of every size and peer, round-robin (the starting peer rotates); the
    numfuse program of ``--warm-ops`` operations is then run warm on its filled cache.
    A peer that is not installed is not run again, nor one that timed out on programs
    as large or larger."""
    not_installed: dict[str, dict] = {}  # peer -> the result of its failed import
    timed_out: dict[str, int] = {}  # peer -> the smallest size it timed out on
    warm_fills = repeats_for(options.warm_ops, options)
    for repeat in range(max(repeats_for(size, options) for size in options.sizes)):
        for size in options.sizes:
            if repeat >= repeats_for(size, options):
                continue
            turn = repeat % len(options.peers)
            for peer in options.peers[turn:] + options.peers[:turn]:
                case = ("program", peer, size)
                if peer in not_installed:
                    runner.record(case, not_installed[peer])
                    continue
                if size >= timed_out.get(peer, math.inf):
                    runner.record(case, {"status": "skipped", "detail": "timed out at "
                                         f"{timed_out[peer]:,} operations"})
                    continue
                spec = {"kind": "program", "peer_name": peer, "path": paths[size],
                        "seed": options.seed}
                if peer == "numfuse" and size == options.warm_ops:
                    result = cold_then_warm(runner, case, ("warm program", size), spec,
                                            f"warm-program-{repeat}",
                                            warm_runs(options, warm_fills))
                else:
                    result = runner.run(case, spec)
                if result["status"] == "not installed":
                    not_installed[peer] = result
                elif result["status"] == "timeout":
                    timed_out[peer] = min(size, timed_out.get(peer, size))


def measure_others(runner: Runner, options: argparse.Namespace, paths: dict[int, str]) -> None:
    """The warm-cache, logp/grad, large-graph and partition cases."""
    if options.warm_ops not in options.sizes:
        spec = {"kind": "program", "peer_name": "numfuse", "path": paths[options.warm_ops],
                "seed": options.seed}
        fills = repeats_for(options.warm_ops, options)
        for repeat in range(fills):
            cold_then_warm(runner, ("cold program", options.warm_ops),
                           ("warm program", options.warm_ops), spec,
                           f"warm-program-{repeat}", warm_runs(options, fills))
    for repeat in range(options.repeats):
        cold_then_warm(runner, ("logp/grad, cold",), ("logp/grad, warm cache",),
                       {"kind": "logp_grad", "warm_up": False}, f"logp-{repeat}", 1)
        runner.run(("logp/grad, cold, compiler warmed",), {"kind": "logp_grad", "warm_up": True})
    if options.graph_ops:
        fills = repeats_for(options.graph_ops, options)
        for repeat in range(fills):
            cold_then_warm(runner, ("graph, cold",), ("graph, warm cache",),
                           {"kind": "graph", "ops": options.graph_ops}, f"graph-{repeat}",
                           warm_runs(options, fills))
    runner.run(("partition",), {"kind": "partition", "ops": PARTITION_OPS})


# ------------------------------------------------------------------------ the report

def median(results: list[dict], key: str = "seconds") -> float | None:
    """The median of ``key`` over the results, None unless every run succeeded."""
    if not results or any(result["status"] != "ok" for result in results):
        return None
    return statistics.median(result[key] for result in results)


def failure(results: list[dict]) -> dict:
    """The first run that did not succeed."""
    return next(result for result in results if result["status"] != "ok")


def readable(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def kernels(count: int) -> str:
    return f"{count} kernel{'' if count == 1 else 's'}"


def cache_note(results: list[dict], warm: bool) -> str:
    """Whether the kernels of the runs came from the disk cache, as ``warm`` says they
    should (every compile event ``from_cache``) or not (none)."""
    flags = [flag for result in results for flag in result["from_cache"]]
    count = len(results[0]["from_cache"])
    if warm:
        return (f"{kernels(count)}, all loaded from disk" if flags and all(flags) else
                f"NOT all loaded from disk: {flags.count(False)} compiled")
    return (f"{kernels(count)} compiled" if not any(flags) else
            f"{flags.count(True)} of the kernels unexpectedly loaded from disk")


def size_table(results: dict, options: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The cold-first-call table by program size, and the notes under it."""
    ratios = [peer for peer in options.peers if peer != "numfuse"] \
        if "numfuse" in options.peers else []
    header = ["operations"]
    for peer in options.peers:
        header += [f"{LABELS[peer]} (s)", *(["numfuse kernels"] if peer == "numfuse" else [])]
    header += [*(f"numfuse ÷ {LABELS[peer]}" for peer in ratios), "repetitions"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    notes = []
    for size in options.sizes:
        row = [f"{size:,}"]
        times = {}
        for peer in options.peers:
            runs = results[("program", peer, size)]
            times[peer] = median(runs)
            if times[peer] is None:
                failed = failure(runs)
                row.append(failed["status"])
                where = "" if failed["status"] == "not installed" else f", {size:,} operations"
                notes.append(f"{LABELS[peer]}{where}: {failed['status']} ({failed['detail']})")
            else:
                row.append(f"{times[peer]:#.3g}")
                if not all(result["matches"] for result in runs):
                    notes.append(f"{LABELS[peer]}, {size:,} operations: results differ from "
                                 f"numpy's (rtol {RTOL:g})")
            if peer == "numfuse":
                row.append(str(len(runs[0]["from_cache"])) if times[peer] is not None else "")
        for peer in ratios:
            both = times["numfuse"] is not None and times[peer] is not None
            row.append(f"{times['numfuse'] / times[peer]:.2g}" if both else "–")
        row.append(str(repeats_for(size, options)))
        lines.append("| " + " | ".join(row) + " |")
    return lines, list(dict.fromkeys(notes))


def growth_line(results: dict, options: argparse.Namespace) -> str:
    """The exponent k of time ~ N^k from 100 operations to the largest size, per peer."""
    largest = max(options.sizes)
    if 100 not in options.sizes or largest <= 100:
        return ("Growth exponent: not computed (it needs 100 operations and a larger size "
                "among `--sizes`).")
    parts = []
    for peer in options.peers:
        low = median(results[("program", peer, 100)])
        high = median(results[("program", peer, largest)])
        if low is not None and high is not None:
            parts.append(f"{LABELS[peer]} {math.log(high / low) / math.log(largest / 100):.2f}")
    return (f"Growth exponent of the time from 100 to {largest:,} operations, "
            f"log(t_{largest} / t_100) / log({largest} / 100) (1 = linear): "
            + (", ".join(parts) or "no peer ran both sizes") + ".")


def imports_line(results: dict, options: argparse.Namespace) -> str:
    parts = []
    for peer in options.peers:
        runs = [result for size in options.sizes for result in results[("program", peer, size)]
                if result["status"] == "ok"]
        if runs:
            parts.append(f"{LABELS[peer]} {readable(median(runs, 'import'))}")
    return ("Imports (numpy and the compiler's library; excluded from the times, median): "
            + (", ".join(parts) or "none ran") + ".")


def other_rows(results: dict, options: argparse.Namespace) -> list[str]:
    """The table of the warm-cache, logp/grad, large-graph and partition cases."""
    program = f"numfuse, {options.warm_ops:,}-operation program"
    cases = [
        (("cold program", options.warm_ops), f"{program}, cold (fills the cache)", False),
        (("warm program", options.warm_ops), f"{program}, warm cache", True),
        (("logp/grad, cold",), "logp/grad, cold", False),
        (("logp/grad, cold, compiler warmed",), "logp/grad, cold, compiler warmed", False),
        (("logp/grad, warm cache",), "logp/grad, warm cache", True),
        (("graph, cold",), f"{options.graph_ops:,}-node graph, cold", False),
        (("graph, warm cache",), f"{options.graph_ops:,}-node graph, warm cache", True),
        (("partition",), f"partition of {PARTITION_OPS:,} operations (`partition` only)", None),
    ]
    lines = ["| case | time | repetitions | import (excluded) | notes |",
             "|---|---:|---:|---:|---|"]
    for key, label, warm in cases:
        runs = results.get(key)
        if not runs:
            continue
        seconds = median(runs)
        if seconds is None:
            failed = failure(runs)
            lines.append(f"| {label} | {failed['status']} | {len(runs)} | | "
                         f"{failed['detail']} |")
            continue
        first = runs[0]
        if warm is None:  # the partition: repeated inside one process
            repetitions = f"{first['repeats']} in one process"
            notes = [f"{first['nodes']:,} graph nodes, {first['regions']:,} regions"]
        else:
            repetitions = str(len(runs))
            notes = [*([f"{first['nodes']:,} graph nodes"] if "nodes" in first else []),
                     cache_note(runs, warm)]
        if not all(result.get("matches", True) for result in runs):
            notes.append("results differ from numpy's")
        lines.append(f"| {label} | {readable(seconds)} | {repetitions} | "
                     f"{readable(median(runs, 'import'))} | {'; '.join(notes)} |")
    return lines


def version(package: str) -> str:
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{package} not installed"


def environment(load: float, seconds: float) -> list[str]:
    versions = [f"Python {platform.python_version()}",
                *(version(package) for package in ("numpy", "numba", "llvmlite", "jax",
                                                   "jaxlib", "torch")),
                f"numfuse git {revision()}"]
    return [f"* CPU: {cpu_model()}, {os.cpu_count()} logical cores, {platform.machine()}, "
            f"{platform.system()}",
            "* " + ", ".join(versions),
            f"* load average (1 min) {load:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
            f"the benchmark took {seconds:.0f} s"]


def ran(peer: str, results: dict, options: argparse.Namespace) -> bool:
    """Whether ``peer`` compiled a program at least once."""
    return any(result["status"] == "ok" for size in options.sizes
               for result in results.get(("program", peer, size), []))


def report(results: dict, options: argparse.Namespace, load: float, seconds: float) -> str:
    table, notes = size_table(results, options)
    lines = [
        "# Compile time: first call, and the disk cache",
        "",
        f"* command: `{' '.join(['python benchmarks/bench_compile.py', *sys.argv[1:]])}`",
        *environment(load, seconds),
        "",
        "Every time is a first call in a fresh Python process with its own empty cache "
        "directory (warm cases: the directory an earlier process filled), measured inside "
        "the process after its imports; medians over the repetitions. See "
        "`benchmarks/bench_compile.py` for what each case does.",
        *(["", "torch.compile's times include building its precompiled C++ header, which "
                "torch otherwise keeps in the system temporary directory for later "
                "processes."] if ran("torch", results, options) else []),
        "",
        "## Cold first call by program size",
        "",
        f"A seeded random program of N elementwise operations (ufuncs and operators, "
        f"fan-out, five outputs) on three float64 arrays of {ELEMENTS:,} elements, the same "
        "source text for every peer. Seconds; the ratio columns are numfuse's time ÷ the "
        "peer's (below 1: numfuse compiles faster).",
        "",
        *table,
        "",
        *(f"* {note}" for note in notes),
        *([""] if notes else []),
        growth_line(results, options),
        "",
        imports_line(results, options),
        "",
        "## Warm cache, logp/grad, large graph, partition",
        "",
        *other_rows(results, options),
    ]
    return "\n".join(lines) + "\n"


def plot(results: dict, options: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for peer in options.peers:
        points = [(size, median(results.get(("program", peer, size), [])))
                  for size in options.sizes]
        points = [(size, seconds) for size, seconds in points if seconds is not None]
        if points:
            ax.plot(*zip(*points, strict=True), "o-", label=LABELS[peer],
                    linewidth=2.4 if peer == "numfuse" else 1.4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlabel("elementwise operations in the program")
    ax.set_ylabel("first call, cold (s)")
    ax.set_title(f"Compile time: first call in a fresh process ({ELEMENTS:,} float64)")
    ax.grid(True, which="major", alpha=0.4)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- main

def write_programs(options: argparse.Namespace, work: Path) -> dict[int, str]:
    """Generate every program once; the files are what the processes compile."""
    paths = {}
    for size in {*options.sizes, options.warm_ops}:
        source = program_source(size, options.seed)
        assert count_operations(source) == size, (size, count_operations(source))
        path = work / f"program-{size}.py"
        path.write_text(source)
        paths[size] = str(path)
    return paths


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated numbers of operations "
                        f"(default {','.join(map(str, SIZES))})")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"comma-separated, among {','.join(PEERS)} (default: all)")
    parser.add_argument("--repeats", type=int, default=3,
                        help=f"repetitions of programs up to {LARGE} operations and of the "
                        "other cases (default 3)")
    parser.add_argument("--large-repeats", type=int, default=1,
                        help=f"repetitions of programs above {LARGE} operations and of the "
                        "large graph's cold compile (default 1)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds allowed to each process (default 900)")
    parser.add_argument("--warm-ops", type=int, default=1000,
                        help="operations of the program run on a warm cache (default 1000)")
    parser.add_argument("--graph-ops", type=int, default=1500,
                        help="operations of bench_partition's random graph (default 1500)")
    parser.add_argument("--no-graph", action="store_true", help="skip the large graph")
    parser.add_argument("--seed", type=int, default=0, help="seed of the programs")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: sizes 10,100, one repetition, no large graph")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a measured process's case
    options = parser.parse_args()
    if options.quick:
        options.sizes = options.sizes or ",".join(map(str, QUICK_SIZES))
        options.repeats = options.large_repeats = 1
        options.no_graph = True
    options.sizes = sorted({int(size) for size in (options.sizes or
                                                   ",".join(map(str, SIZES))).split(",")})
    options.peers = [peer.strip() for peer in options.peers.split(",")]
    unknown = set(options.peers) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers {sorted(unknown)}; choose among {','.join(PEERS)}")
    if options.no_graph:
        options.graph_ops = 0
    return options


def main() -> None:
    options = parse_options()
    if options.child:
        spec = json.loads(options.child)
        print(json.dumps(CHILDREN[spec.pop("kind")](**spec)))
        return
    load, began = os.getloadavg()[0], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="numfuse-bench-compile-") as directory:
        work = Path(directory)
        paths = write_programs(options, work)
        runner = Runner(work, options.timeout)
        measure_programs(runner, options, paths)
        measure_others(runner, options, paths)
    text = report(runner.results, options, load, time.perf_counter() - began)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "compile.md").write_text(text)
    print(f"written to {RESULTS / 'compile.md'}")
    try:
        plot(runner.results, options, RESULTS / "compile.png")
        print(f"written to {RESULTS / 'compile.png'}")
    except ImportError:
        print("matplotlib is not installed: no plot written (pip install matplotlib)")


if __name__ == "__main__":
    main()
