"""Compiling in the background: calls run with numpy until the kernels are ready, then on
the kernels; the switch is reported; errors, threads, dask and the disk cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same

import numfuse
from numfuse import backend, hooks
from numfuse.errors import KernelCompileError

REPO = Path(numfuse.__file__).resolve().parent.parent
X = np.linspace(-2.0, 2.0, 1001)


def _held_compiles(monkeypatch):
    """Make kernel compiles wait until the returned event is set."""
    release = threading.Event()
    compile_gufunc = backend.compile_gufunc

    def held(source, cache=True):
        assert release.wait(timeout=60), "the test never released the compile"
        return compile_gufunc(source, cache)

    monkeypatch.setattr(backend, "compile_gufunc", held)
    return release


def _softplus(x, shift):
    e = np.exp(-np.abs(x - shift))
    return np.log1p(e) + np.maximum(x - shift, 0.0), e / (1.0 + e)


_fresh = iter(range(1, 10**6))


def fresh_softplus():
    """``_softplus`` with a constant of its own, so its kernel is new to this process."""
    scale = 1.0 + (os.getpid() % 997) / 1e4 + next(_fresh) / 1e8

    def softplus(x, shift):
        e = np.exp(-np.abs(x - shift) * scale)
        return np.log1p(e) + np.maximum(x - shift, 0.0), e / (1.0 + e)

    return softplus


def test_calls_run_with_numpy_until_the_kernels_are_ready_then_switch(monkeypatch):
    release = _held_compiles(monkeypatch)
    softplus = fresh_softplus()
    jitted = numfuse.jit(softplus, background=True)
    expected = softplus(X, 0.125)
    with hooks.recording_calls() as calls, hooks.recording() as compiles:
        for _ in range(3):
            assert_same(jitted(X, 0.125), expected)   # numpy's own results meanwhile
        assert jitted.compiled == {} and compiles == []
        release.set()
        jitted.wait()
        assert len(jitted.compiled) == 1 and [event.from_cache for event in compiles] in (
            [False], [True])
        assert_same(jitted(X, 0.125), expected, rtol=1e-14)   # the kernels, from now on
        assert_same(jitted(X, 0.125), expected, rtol=1e-14)
    assert [call.path for call in calls] == ["numpy"] * 3 + ["kernels"]
    assert {call.function for call in calls} == {softplus.__qualname__}
    assert calls[0].signature == "1-d array float64[n], Python float"


def test_a_new_signature_compiles_in_the_background_too(monkeypatch):
    softplus = fresh_softplus()
    jitted = numfuse.jit(softplus, background=True)
    jitted(X, 0.5)
    jitted.wait()
    release = _held_compiles(monkeypatch)
    single = X.astype(np.float32)
    with hooks.recording_calls() as calls:
        assert_same(jitted(single, 0.5), softplus(single, 0.5))
        release.set()
        jitted.wait()
        assert_same(jitted(single, 0.5), softplus(single, 0.5), rtol=1e-6)
    assert [call.path for call in calls] == ["numpy", "kernels"]
    assert len(jitted.compiled) == 2


def test_a_compile_error_is_raised_in_the_caller_naming_the_kernel(monkeypatch):
    def broken(source, cache=True):
        raise RuntimeError("LLVM refused")

    monkeypatch.setattr(backend, "compile_gufunc", broken)
    softplus = fresh_softplus()
    jitted = numfuse.jit(softplus, background=True)
    assert_same(jitted(X, 0.5), softplus(X, 0.5))   # numpy ran it; the compile failed meanwhile
    with pytest.raises(KernelCompileError, match=r"kernel kernel_\w+ .*LLVM refused"):
        jitted.wait()
    for _ in range(2):                        # and at every later call of that signature
        with pytest.raises(KernelCompileError, match="LLVM refused"):
            jitted(X, 0.5)


def test_tracing_errors_are_raised_at_the_first_call():
    jitted = numfuse.jit(lambda x: float(x.sum()) * x, background=True)
    with pytest.raises(numfuse.ConcretizationError):
        jitted(X)


def test_threads_calling_at_once_all_get_numpys_results(monkeypatch):
    release = _held_compiles(monkeypatch)
    softplus = fresh_softplus()
    jitted = numfuse.jit(softplus, background=True)
    expected = softplus(X, 0.25)
    with ThreadPoolExecutor(8) as pool:
        early = [pool.submit(jitted, X, 0.25) for _ in range(16)]
        for future in early:
            assert_same(future.result(timeout=60), expected)
        release.set()
        late = [pool.submit(jitted, X, 0.25) for _ in range(16)]
        for future in late:
            assert_same(future.result(timeout=60), expected, rtol=1e-14)
    jitted.wait()
    assert len(jitted.compiled) == 1


def test_dask_arrays_wait_for_the_kernels():
    da = pytest.importorskip("dask.array")
    jitted = numfuse.jit(_softplus, background=True)
    chunked = da.from_array(X, chunks=250)
    result = jitted(chunked, 0.75)
    assert len(jitted.compiled) == 1
    assert_same(tuple(part.compute() for part in result), _softplus(X, 0.75), rtol=1e-14)


def test_out_waits_for_the_kernels():
    jitted = numfuse.jit(lambda x: x * 3.25, background=True)
    out = np.empty_like(X)
    jitted(X, out=out)
    assert_same(out, X * 3.25)
    assert len(jitted.compiled) == 1


def test_the_environment_sets_the_default(monkeypatch):
    monkeypatch.setenv("NUMFUSE_BACKGROUND", "1")
    assert numfuse.jit(_softplus).background
    assert not numfuse.jit(_softplus, background=False).background
    monkeypatch.setenv("NUMFUSE_BACKGROUND", "0")
    assert not numfuse.jit(_softplus).background


def test_pickling_keeps_the_setting():
    import pickle

    restored = pickle.loads(pickle.dumps(numfuse.jit(_softplus, background=True)))
    assert restored.background


BACKGROUND_RUN = """
import json
import numpy as np
import numfuse
from numfuse import hooks

@numfuse.jit(background=True)
def logp_and_grad(x, mu):
    d = x - mu
    return -(d ** 2) / 2, -d

x = np.linspace(-3.0, 3.0, 1001)
with hooks.recording() as compiles, hooks.recording_calls() as calls:
    logp, grad = logp_and_grad(x, 0.25)
    logp_and_grad.wait()
    logp, grad = logp_and_grad(x, 0.25)
print(json.dumps({"from_cache": [event.from_cache for event in compiles],
                  "paths": [call.path for call in calls],
                  "correct": bool(np.array_equal(grad, -(x - 0.25)))}))
"""


def test_a_background_compile_fills_the_disk_cache_for_the_next_process(tmp_path):
    environment = {**os.environ, "NUMFUSE_CACHE_DIR": str(tmp_path / "cache"),
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

    def run() -> dict:
        process = subprocess.run([sys.executable, "-c", textwrap.dedent(BACKGROUND_RUN)],
                                 cwd=REPO, env=environment, capture_output=True, text=True,
                                 timeout=300)
        assert process.returncode == 0, process.stderr
        return json.loads(process.stdout.strip().splitlines()[-1])

    first = run()
    assert first == {"from_cache": [False], "paths": ["numpy", "kernels"], "correct": True}
    second = run()
    assert second["from_cache"] == [True] and second["correct"]
