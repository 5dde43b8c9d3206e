"""numfuse against its peers on six workloads at sizes 1e2 ... 1e7.

Peers, all in this one process: numpy, numexpr, numba ``@njit`` and ``@njit(parallel=True)``
of the same numpy code, ``jax.jit`` (64-bit enabled), ``torch.compile`` of the same numpy
function (Inductor compiles numpy code: numpy arrays in, numpy arrays out), a
hand-written ``@njit`` loop over the elements (the practical limit of one compiled loop)
and the same loop compiled with ``parallel=True`` (a ``prange`` over both cores).
numexpr, jax and torch are used when importable (``pip install -e '.[bench]'``; torch from
its own index, e.g. ``pip install torch --index-url https://download.pytorch.org/whl/cpu``).

For every workload and size: every implementation is called once to compile (warm-up) and
its results are checked against numpy's (``np.testing.assert_allclose``, rtol 1e-12 for
float64, 1e-6 for float32, atol = rtol * max|numpy result| for cancellation); one that
raises or disagrees is reported and not timed.  Then each repetition times every
implementation once, round-robin (the order rotates each repetition), so a busy machine slows
all of them alike; a short untimed pause follows each sample (``SETTLE_SECONDS``).
Tiny calls are batched so one sample lasts at least ``--min-sample``
seconds; repetitions are capped so one (workload, size) takes about ``--budget`` seconds.

Outputs are allocated by each implementation inside the timed call (the hand-written loops
allocate with ``np.empty`` outside the njit function, inside the timing); jax inputs are
converted with ``jnp.asarray`` once, outside the timing, and results are waited for with
``block_until_ready``.

Run:  python benchmarks/suite.py [--max-size 1e6] [--quick] [--workloads logp_grad,gelu_f32]
Writes benchmarks/results/suite.md (tables) and benchmarks/results/suite.png (plot).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# numba's OpenMP workers spin after each parallel call unless told otherwise, slowing
# whatever is timed next on a 2-core machine (njit(parallel) peers included).
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from machine import cpu_model, revision
from workloads import WORKLOADS, Workload

import numfuse

try:
    import numexpr
except ImportError:
    numexpr = None

try:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
except ImportError:
    jax = None

try:
    import torch
except ImportError:
    torch = None

# A pause after each sample, untimed: worker threads that spin for a while after a call
# (numfuse's helpers, 0.3 ms; OpenMP's unless OMP_WAIT_POLICY=passive) go idle before the
# next implementation is timed, so none is slowed by the one before it.
SETTLE_SECONDS = 2e-3
SIZES = (10**2, 10**3, 10**4, 10**5, 10**6, 10**7)
QUICK_SIZES = (10**2, 10**4, 10**6)
RESULTS = Path(__file__).parent / "results"
# Display order; numfuse first, the hand loops last.
ORDER = ("numpy", "numfuse", "numexpr", "numba", "numba_par", "jax", "torch", "loop",
         "ploop")
LABELS = {"numpy": "numpy", "numfuse": "numfuse", "numexpr": "numexpr", "numba": "njit",
          "numba_par": "njit(parallel)", "jax": "jax.jit", "torch": "torch.compile",
          "loop": "hand loop", "ploop": "parallel hand loop"}
# "best peer" is chosen among these
PEERS = ("numpy", "numexpr", "numba", "numba_par", "jax", "torch")


@dataclass
class Implementation:
    name: str
    call: Callable  # call(*args) -> outputs, blocking until they are ready
    convert: Callable = tuple  # applied to the arguments once per size, outside timing


@dataclass
class Cell:
    """One implementation at one size: its samples, or why it was not timed."""
    samples: list[float] = field(default_factory=list)
    status: str = ""  # "" when timed, else "n/a: ..." / "mismatch: ..." / "error: ..."

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan


# --------------------------------------------------------------------------- implementations

def _jax_call(fn):
    def call(*args):
        out = fn(*args)
        return jax.block_until_ready(out)
    return call


def _jax_convert(args):
    return tuple(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)


def implementations(workload: Workload) -> dict[str, Implementation]:
    reference = workload.build(np)
    found = {
        "numpy": Implementation("numpy", reference),
        "numfuse": Implementation("numfuse", numfuse.jit(reference)),
    }
    if numexpr is not None and workload.numexpr is not None:
        ne_fn = workload.numexpr
        found["numexpr"] = Implementation("numexpr", lambda *args: ne_fn(numexpr, *args))
    found["numba"] = Implementation("numba", numba.njit(reference))
    found["numba_par"] = Implementation("numba_par", numba.njit(parallel=True)(reference))
    if jax is not None:
        found["jax"] = Implementation("jax", _jax_call(jax.jit(workload.build(jnp))),
                                      _jax_convert)
    if torch is not None:
        # Shapes marked dynamic: one compiled program serves every size, as for numfuse.
        found["torch"] = Implementation("torch", torch.compile(reference, dynamic=True))
    if workload.loop is not None:
        found["loop"] = Implementation("loop", workload.loop)
    if workload.parallel_loop is not None:
        found["ploop"] = Implementation("ploop", workload.parallel_loop)
    return found


# --------------------------------------------------------------------------- check and time

def as_tuple(result) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def check(workload: Workload, got, want) -> None:
    got, want = as_tuple(got), as_tuple(want)
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} outputs, numpy gives {len(want)}")
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype or g.shape != w.shape:
            raise AssertionError(f"{g.dtype}{list(g.shape)}, numpy gives {w.dtype}{list(w.shape)}")
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        np.testing.assert_allclose(g, w, rtol=workload.rtol, atol=workload.rtol * scale)


def describe(error: BaseException) -> str:
    text = " ".join(str(error).split())
    first = text.split(" Mismatched elements")[0]
    return f"{type(error).__name__}: {first}"[:300]


def prepare(workload: Workload, impls: dict[str, Implementation], args, expected,
            min_sample: float) -> tuple[dict, dict[str, Cell], dict[str, int], dict[str, float]]:
    """Warm up and check every implementation; return converted args, cells, batch sizes
    and estimated seconds per call."""
    converted: dict[str, tuple] = {}
    cells: dict[str, Cell] = {}
    batch: dict[str, int] = {}
    per_call: dict[str, float] = {}
    for name, impl in impls.items():
        cell = cells[name] = Cell()
        try:
            converted[name] = impl.convert(args)
            start = time.perf_counter()
            got = impl.call(*converted[name])
            first = time.perf_counter() - start
        except Exception as error:  # reported, not fatal
            kind = "n/a" if name == "numfuse" else "error"
            cell.status = f"{kind}: {describe(error)}"
            continue
        try:
            check(workload, got, expected)
        except AssertionError as error:
            cell.status = f"mismatch: {describe(error)}"
            continue
        del got
        # The first call may have compiled; a slow second call (a big size) is estimate
        # enough, the repetitions being capped at the minimum anyway.
        if first > 0.05:
            start = time.perf_counter()
            impl.call(*converted[name])
            first = time.perf_counter() - start
        per_call[name] = first if first > 0.05 else _estimate(impl, converted[name])
        batch[name] = max(1, math.ceil(min_sample / per_call[name]))
    return converted, cells, batch, per_call


def measure(impls, converted, cells, batch, repeats: int) -> None:
    timed = [name for name in impls if not cells[name].status]
    for rep in range(repeats):
        shift = rep % len(timed)
        for name in timed[shift:] + timed[:shift]:  # round-robin, rotating the start
            call, args, calls = impls[name].call, converted[name], batch[name]
            gc.disable()
            start = time.perf_counter()
            for _ in range(calls):
                call(*args)
            elapsed = time.perf_counter() - start
            gc.enable()
            cells[name].samples.append(elapsed / calls)
            time.sleep(SETTLE_SECONDS)  # threads left spinning by this one stop first


def run_one(workload: Workload, impls, size: int, options, rng) -> dict[str, Cell]:
    args = workload.make_args(size, rng)
    expected = impls["numpy"].call(*args)
    converted, cells, batch, per_call = prepare(workload, impls, args, expected,
                                                options.min_sample)
    del expected
    # Cap repetitions so this (workload, size) takes about options.budget seconds.
    per_rep = sum(batch[name] * per_call[name] for name in batch) or 1e-3
    repeats = max(options.min_repeats, min(options.repeats, int(options.budget / per_rep)))
    measure(impls, converted, cells, batch, repeats)
    gc.collect()
    return cells


def seconds_per_call(call: Callable, args, at_least: float = 1e-3,
                     most: int = 10_000) -> float:
    """Seconds per call of ``call(*args)`` called back to back: at least one call, for
    about ``at_least`` seconds or ``most`` calls."""
    calls = 0
    start = time.perf_counter()
    while True:
        call(*args)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed > at_least or calls >= most:
            return elapsed / calls


def _estimate(impl: Implementation, args) -> float:
    """Seconds per call when called back to back: the least of three bouts of about 1 ms
    (a first bout can hold one-time costs, such as a thread pool starting, that would
    make the batches too short)."""
    return min(seconds_per_call(impl.call, args) for _ in range(3))


def numfuse_plan(jitted) -> str:
    """The graphs numfuse compiled (one per signature), printed, or "" if unavailable."""
    try:
        return "\n".join(str(compiled.graph) for compiled in jitted.compiled.values())
    except Exception:  # informative only
        return ""


# --------------------------------------------------------------------------- report

def format_time(seconds: float) -> str:
    if math.isnan(seconds):
        return "—"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def size_label(size: int) -> str:
    return f"1e{round(math.log10(size))}" if size > 0 else "0"


def ratio(cells: dict[str, Cell], numerator: str, denominator: str) -> float:
    """cells[numerator].median / cells[denominator].median, NaN if either was not timed."""
    top, bottom = cells.get(numerator), cells.get(denominator)
    if top is None or bottom is None or top.status or bottom.status:
        return math.nan
    return top.median / bottom.median


def speedup(cells: dict[str, Cell], name: str) -> float:
    """numpy's median over ``name``'s (above 1: faster than numpy); NaN if not timed."""
    return ratio(cells, "numpy", name)


def fixed(value: float, suffix: str = "") -> str:
    return "—" if math.isnan(value) else f"{value:.2f}{suffix}"


ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")  # numba highlights its error messages


def time_cells(cells: dict[str, Cell], names: Sequence[str], labels: dict[str, str],
               notes: list[str]) -> list[str]:
    """A table row's cell per implementation: numpy's time, the others' time and speed-up
    over numpy, "—" where not run, the kind of failure where it failed (its message added
    to ``notes`` once)."""
    row = []
    for name in names:
        cell = cells.get(name)
        if cell is None:
            row.append("—")
        elif cell.status:
            row.append(cell.status.split(":")[0])
            note = f"{labels[name]}: {ANSI_CODE.sub('', cell.status)}"
            if note not in notes:
                notes.append(note)
        elif name == "numpy":
            row.append(format_time(cell.median))
        else:
            row.append(f"{format_time(cell.median)} ({fixed(speedup(cells, name), 'x')})")
    return row


def best_peer(cells: dict[str, Cell]) -> str | None:
    timed = [name for name in PEERS if name in cells and not cells[name].status]
    return min(timed, key=lambda name: cells[name].median) if timed else None


def workload_table(workload: Workload, by_size: dict[int, dict[str, Cell]]) -> list[str]:
    names = [name for name in ORDER if any(name in cells for cells in by_size.values())]
    header = ["n", *(LABELS[name] for name in names), "numfuse ÷ best peer",
              "numfuse ÷ hand loop", "numfuse ÷ parallel hand loop"]
    lines = ["| " + " | ".join(header) + " |", "|---:|" + "---:|" * (len(header) - 1)]
    notes: list[str] = []
    for size, cells in by_size.items():
        row = [f"{size_label(size)} ({workload.elements(size):,})",
               *time_cells(cells, names, LABELS, notes)]
        nf = cells.get("numfuse")
        peer = best_peer(cells)
        if nf is None or nf.status or peer is None:
            row += ["n/a", "n/a", "n/a"]
        else:
            row.append(f"{cells[peer].median / nf.median:.2f}x (vs {LABELS[peer]})")
            for name in ("loop", "ploop"):
                loop = cells.get(name)
                row.append("—" if loop is None or loop.status
                           else f"{loop.median / nf.median:.2f}x")
        lines.append("| " + " | ".join(row) + " |")
    for note in notes:
        lines.append("")
        lines.append(f"* {note}")
    return lines


def summary_tables(results: dict[str, dict[int, dict[str, Cell]]]) -> list[str]:
    sizes = sorted({size for by_size in results.values() for size in by_size})
    header = "| workload | " + " | ".join(size_label(s) for s in sizes) + " |"
    rule = "|---|" + "---:|" * len(sizes)

    def matrix(value: Callable[[dict[str, Cell]], str]) -> list[str]:
        lines = [header, rule]
        for workload, by_size in results.items():
            row = [workload] + [value(by_size[s]) if s in by_size else "—" for s in sizes]
            lines.append("| " + " | ".join(row) + " |")
        return lines

    def numfuse_over(cells, other: str) -> str:
        nf, ref = cells.get("numfuse"), cells.get(other)
        if nf is None or nf.status or ref is None or ref.status:
            return "n/a"
        return f"{ref.median / nf.median:.2f}"

    def vs_best(cells) -> str:
        peer = best_peer(cells)
        nf = cells.get("numfuse")
        if nf is None or nf.status or peer is None:
            return "n/a"
        return f"{cells[peer].median / nf.median:.2f} ({LABELS[peer]})"

    out = ["## Summary: numfuse speed-up (other's median time ÷ numfuse's; above 1 = "
           "numfuse faster)", ""]
    for other in ("numpy", "numexpr", "numba", "numba_par", "jax", "torch", "loop", "ploop"):
        if not any(other in cells for by_size in results.values()
                   for cells in by_size.values()):
            continue
        out += [f"### numfuse vs {LABELS[other]}", "", *matrix(
            lambda cells, other=other: numfuse_over(cells, other)), ""]
    out += ["### numfuse vs the best peer (numpy, numexpr, njit, njit(parallel), jax.jit, "
            "torch.compile)", "",
            *matrix(vs_best), ""]
    return out


def environment() -> list[str]:
    versions = [f"Python {platform.python_version()}", f"numpy {np.__version__}",
                f"numba {numba.__version__} ({numba.get_num_threads()} threads)",
                f"numfuse {numfuse.__version__} (git {revision()})"]
    versions.append(f"numexpr {numexpr.__version__} ({numexpr.get_num_threads()} threads)"
                    if numexpr is not None else "numexpr not installed")
    versions.append(f"jax {jax.__version__} ({jax.default_backend()}, x64)"
                    if jax is not None else "jax not installed")
    versions.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
                    if torch is not None else "torch not installed")
    return [f"* CPU: {cpu_model()}, {os.cpu_count()} logical cores, {platform.machine()}, "
            f"{platform.system()}",
            "* " + ", ".join(versions)]


def report(results, workloads: dict[str, Workload], plans: dict[str, str], options,
           load: tuple, seconds: float) -> str:
    lines = [
        "# numfuse benchmark suite",
        "",
        *environment(),
        f"* load average (1 min) {load[0]:.2f} at start, {load[1]:.2f} at end; "
        f"suite took {seconds:.0f} s",
        "* freed memory retained for reuse (numfuse.retain_freed_memory(), all peers): "
        f"{'yes' if getattr(options, 'retain_memory', False) else 'no'}",
        "",
        "Median time per call over interleaved repetitions (each repetition times every "
        "implementation once, round-robin); in brackets the speed-up over numpy (numpy's "
        "median ÷ the implementation's; above 1 = faster than numpy). "
        "\"numfuse ÷ best peer\" is the best peer's median ÷ numfuse's median (above 1 = numfuse "
        "faster), the best peer being the fastest of numpy, numexpr, njit, njit(parallel), "
        "jax.jit and torch.compile; \"numfuse ÷ hand loop\" likewise against the hand-written "
        "`@njit` loop, and \"numfuse ÷ parallel hand loop\" against the same loop compiled "
        "with `@njit(parallel=True)`, its loop a `prange`. numexpr, njit(parallel), jax, "
        "torch and the parallel hand loop use both cores; numfuse "
        "splits a call over both when that pays on the machine at the time (see "
        "numfuse/threads.py); numpy, njit and the hand loop use one. Before timing, every "
        "result is checked against numpy's; "
        "\"mismatch\", \"error\" and \"n/a\" cells were not timed (reasons below each table).",
        f"Repetitions: up to {options.repeats}, at least {options.min_repeats}, capped at about "
        f"{options.budget:g} s per workload and size; calls shorter than "
        f"{options.min_sample * 1e3:g} ms are batched.",
        "",
        "On a shared machine, code that splits every call statically over both cores "
        "(njit(parallel) above all) waits at each call for its slower thread: when another "
        "process holds a core, a call costs a scheduler time slice (4-8 ms were measured "
        "here for 100 elements), so its small-size figures show the machine's load as much "
        "as the code.",
        "",
    ]
    for name, by_size in results.items():
        workload = workloads[name]
        lines += [f"## {name}: {workload.title} ({workload.dtype})", ""]
        if workload.note:
            lines += [workload.note, ""]
        lines += [*workload_table(workload, by_size), ""]
        if plans.get(name):
            lines += ["<details><summary>numfuse's compiled graph (kernels and layouts)"
                      "</summary>", "", "```", plans[name], "```", "</details>", ""]
    lines += summary_tables(results)
    return "\n".join(lines)


FLOOR = 0.01  # speed-ups below this are drawn on the bottom edge of the plot


def plot(results, workloads: dict[str, Workload], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    columns = 3 if len(names) > 4 else min(2, len(names))
    rows = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.9 * rows), squeeze=False)
    styles = {"numpy": ("black", ":"), "numfuse": ("tab:red", "-"), "numexpr": ("tab:green", "--"),
              "numba": ("tab:blue", "--"), "numba_par": ("tab:purple", "--"),
              "jax": ("tab:orange", "--"), "torch": ("tab:brown", "--"),
              "loop": ("tab:gray", "-."), "ploop": ("tab:olive", "-.")}
    for ax, name in zip(axes.flat, names, strict=False):
        by_size = results[name]
        for impl in ORDER:
            points = [(workloads[name].elements(size), speedup(cells, impl))
                      for size, cells in by_size.items()
                      if impl in cells and not cells[impl].status]
            if not points:
                continue
            color, style = styles[impl]
            xs, ys = zip(*points, strict=True)
            clipped = [max(y, FLOOR) for y in ys]
            ax.plot(xs, clipped, style, color=color, marker="o", markersize=3.5,
                    linewidth=2.4 if impl == "numfuse" else 1.3, label=LABELS[impl])
            low = [(x, FLOOR) for x, y in points if y < FLOOR]
            if low:  # off the scale: a triangle on the bottom edge
                ax.plot(*zip(*low, strict=True), "v", color=color, markersize=7)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{name} ({workloads[name].dtype})", fontsize=10)
        ax.set_xlabel("elements")
        ax.set_ylabel("speed-up over numpy")
        ax.grid(True, which="major", alpha=0.4)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    handles: dict = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="lower center",
               ncol=max(1, len(handles)), frameon=False)
    fig.suptitle("numfuse and peers: speed-up over numpy (median, higher is better; "
                 f"▼ = below {FLOOR:g}x)")
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated element counts, e.g. 1e3,1e6 "
                        "(default 1e2 ... 1e7)")
    parser.add_argument("--max-size", type=float, help="drop sizes above this, e.g. 1e6")
    parser.add_argument("--quick", action="store_true",
                        help="5 repetitions, 1 s per workload and size; sizes 1e2, 1e4, 1e6 "
                        "unless --sizes gives them")
    parser.add_argument("--workloads", help="comma-separated subset of: "
                        + ", ".join(w.name for w in WORKLOADS))
    parser.add_argument("--repeats", type=int, default=21, help="most repetitions (default 21)")
    parser.add_argument("--min-repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=6.0,
                        help="about this many seconds of timing per workload and size")
    parser.add_argument("--min-sample", type=float, default=2e-3,
                        help="batch calls so one sample lasts at least this (seconds)")
    parser.add_argument("--output", type=Path, default=RESULTS,
                        help="directory for suite.md and suite.png")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--retain-memory", action="store_true",
                        help="call numfuse.retain_freed_memory() first (glibc keeps freed "
                             "blocks: no page faults for fresh arrays, for every peer)")
    options = parser.parse_args()
    if options.retain_memory:
        numfuse.retain_freed_memory()

    sizes = [int(float(s)) for s in options.sizes.split(",")] if options.sizes else list(SIZES)
    if options.quick:
        sizes = sizes if options.sizes else list(QUICK_SIZES)
        options.repeats, options.min_repeats = 5, 3
        options.budget = min(options.budget, 1.0)
    if options.max_size:
        sizes = [s for s in sizes if s <= options.max_size]
    workloads = {w.name: w for w in WORKLOADS}
    chosen = options.workloads.split(",") if options.workloads else list(workloads)
    unknown = [name for name in chosen if name not in workloads]
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {list(workloads)}")

    load_start = os.getloadavg()[0]
    began = time.perf_counter()
    rng = np.random.default_rng(0)
    results: dict[str, dict[int, dict[str, Cell]]] = {}
    plans: dict[str, str] = {}
    for name in chosen:
        workload = workloads[name]
        impls = implementations(workload)
        results[name] = {}
        for size in sizes:
            t0 = time.perf_counter()
            cells = run_one(workload, impls, size, options, rng)
            results[name][size] = cells
            speedups = ", ".join(
                f"{LABELS[n]} " + (c.status[:40] if c.status else f"{speedup(cells, n):.2f}x")
                for n, c in cells.items() if n != "numpy")
            print(f"{name} n={size_label(size)} ({time.perf_counter() - t0:.1f} s, "
                  f"{len(cells['numpy'].samples)} reps): {speedups}", flush=True)
        plans[name] = numfuse_plan(impls["numfuse"].call)

    seconds = time.perf_counter() - began
    text = report(results, workloads, plans, options, (load_start, os.getloadavg()[0]),
                  seconds)
    print()
    print(text)
    options.output.mkdir(parents=True, exist_ok=True)
    (options.output / "suite.md").write_text(text)
    print(f"written to {options.output / 'suite.md'}")
    if not options.no_plot:
        try:
            plot(results, workloads, options.output / "suite.png")
            print(f"written to {options.output / 'suite.png'}")
        except ImportError:
            print("matplotlib not installed: no plot (pip install -e '.[bench]')")


if __name__ == "__main__":
    main()
