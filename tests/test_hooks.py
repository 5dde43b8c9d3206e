"""Compile events, NUMFUSE_DUMP_DIR, NUMFUSE_DEBUG and the compile log."""

from __future__ import annotations

import itertools
import logging
import os
import warnings

import numpy as np
import pytest

import numfuse
from numfuse import backend, hooks

X = np.linspace(0.0, 1.0, 16)
_fresh = itertools.count()


def unique_constant() -> float:
    """A constant no kernel of this process has used: its kernel compiles anew."""
    return 1.0 + (os.getpid() % 1000) / 1e4 + next(_fresh) / 1e8


def scaled(constant):
    def fn(x):
        return (x - constant) * 3.0
    return fn


def test_one_event_per_new_kernel_and_none_on_a_cache_hit():
    constant = unique_constant()
    with hooks.recording() as events:
        compiled = numfuse.compile(scaled(constant), X)
    assert len(events) == 1
    event = events[0]
    kernel = compiled.kernels[0]
    assert event.kernel is kernel and event.name == kernel.name
    assert event.function.endswith("fn")
    assert repr(constant) in event.source
    assert [node.op for node in event.nodes] == ["subtract", "multiply"]
    assert "subtract" in str(event.graph) and event.layout == "(n)->(n)"
    assert event.compile_time > 0 and event.from_cache is False
    with hooks.recording() as again:
        numfuse.compile(scaled(constant), X * 2)   # same structure: in-memory cache hit
        numfuse.compile(scaled(constant), X[:3])   # a new size never compiles
    assert again == []


def test_ir_and_asm_are_produced_only_when_read(monkeypatch):
    calls = []
    real = backend.llvm_ir
    monkeypatch.setattr(backend, "llvm_ir", lambda gufunc: calls.append(1) or real(gufunc))
    with hooks.recording() as events:
        numfuse.compile(scaled(unique_constant()), X)
    assert calls == []
    assert f"@{events[0].kernel.symbol()}(" in events[0].llvm_ir
    assert calls == [1]
    assert events[0].kernel.symbol() in events[0].asm


def test_register_as_decorator_and_unregister():
    seen = []

    @hooks.register
    def hook(event):
        seen.append(event.name)

    assert hook in hooks.registered()
    try:
        compiled = numfuse.compile(scaled(unique_constant()), X)
    finally:
        hooks.unregister(hook)
    assert seen == [compiled.kernels[0].name]
    numfuse.compile(scaled(unique_constant()), X)
    assert len(seen) == 1
    assert hook not in hooks.registered()
    hooks.unregister(hook)  # unregistering twice is harmless


def test_a_failing_hook_warns_and_never_breaks_the_compile():
    def broken(event):
        raise ValueError("hook bug")

    hooks.register(broken)
    try:
        with hooks.recording() as events, pytest.warns(hooks.HookWarning, match="hook bug"):
            constant = unique_constant()
            compiled = numfuse.compile(scaled(constant), X)
    finally:
        hooks.unregister(broken)
    assert len(events) == 1  # hooks after the broken one still run
    np.testing.assert_allclose(compiled(X), (X - constant) * 3.0)


def test_dump_dir_writes_source_ir_and_assembly(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMFUSE_DUMP_DIR", str(tmp_path / "dump"))
    compiled = numfuse.compile(scaled(unique_constant()), X)
    name = compiled.kernels[0].name
    files = sorted(path.name for path in (tmp_path / "dump").iterdir())
    assert files == [f"{name}.ll", f"{name}.py", f"{name}.s"]
    assert (tmp_path / "dump" / f"{name}.py").read_text() == compiled.kernels[0].source
    assert f"@{compiled.kernels[0].symbol()}(" in (tmp_path / "dump" / f"{name}.ll").read_text()
    assert compiled.kernels[0].symbol() in (tmp_path / "dump" / f"{name}.s").read_text()


def test_debug_prints_graph_regions_and_sources(monkeypatch, capsys):
    monkeypatch.setenv("NUMFUSE_DEBUG", "2")
    compiled = numfuse.compile(scaled(unique_constant()), X)
    err = capsys.readouterr().err
    assert str(compiled.graph) in err
    assert compiled.kernels[0].source in err
    assert "region 0" in err and "compiled in" in err
    assert "vectorised" in err


def test_debug_is_silent_when_unset(monkeypatch, capsys):
    monkeypatch.delenv("NUMFUSE_DEBUG", raising=False)
    numfuse.compile(scaled(unique_constant()), X)
    assert capsys.readouterr().err == ""


def test_compile_log_says_why_each_compile_happened(caplog):
    constant = unique_constant()

    @numfuse.jit
    def affine(x, scale):
        return x * scale + constant

    with caplog.at_level(logging.INFO, logger="numfuse"):
        affine(X, 2.0)
        affine(X + 1, 3.0)                      # same signature: no compile, no record
        affine(X.astype(np.float32), 2.0)       # dtype of x
        affine(X, np.ones((2, 1)))              # ndim of scale
    messages = [record.getMessage() for record in caplog.records if record.name == "numfuse"]
    assert len(messages) == 3
    assert messages[0] == "compiling test_compile_log_says_why_each_compile_happened." \
        "<locals>.affine: first call"
    assert "argument 0 ('x'): the dtype differs (float64 vs float32)" in messages[1]
    assert "argument 1 ('scale'): was a Python float, now a 2-d array float64[n,1]" in messages[2]


def test_compile_log_names_a_changed_broadcast_pattern(caplog):
    @numfuse.jit
    def shifted(x, y):
        return x - y * unique_constant()

    with caplog.at_level(logging.INFO, logger="numfuse"), warnings.catch_warnings():
        shifted(np.ones((3, 4)), np.ones((3, 4)))
        shifted(np.ones((3, 4)), np.ones((3, 1)))
    assert "argument 1 ('y'): the length-1 (broadcast) dimensions differ at axes [1]" in \
        caplog.records[-1].getMessage()
