"""The native spin: it returns once the word changes (or its turns are spent), adds to
the word it is told to bump, and runs without the GIL."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from numfuse import spinning


@pytest.fixture(scope="module")
def spinner():
    built = spinning.spinner()
    if built is None:
        pytest.skip("no native spin on this platform")
    return built


def test_a_word_left_alone_returns_its_value_after_the_turns(spinner):
    words = np.array([7, 0], np.int64)
    start = time.perf_counter()
    assert spinner.until_changed(words, 0, 7, spinner.turns(2e-3), 0) == 7
    assert time.perf_counter() - start >= 1e-3  # about the time asked for, not nothing
    assert spinner.turns(1.0) > spinner.turns(1e-3) >= 1


def test_a_changed_word_returns_the_new_value_at_once(spinner):
    words = np.array([3, 0], np.int64)
    assert spinner.until_changed(words, 0, 2, spinner.turns(10.0), 0) == 3


def test_the_bumped_word_gains_one(spinner):
    words = np.zeros(16, np.int64)
    spinner.until_changed(words, 0, 0, 1, 0, bump=8)
    spinner.until_changed(words, 0, 0, 1, 0, bump=8)
    assert words.tolist() == [0] * 8 + [2] + [0] * 7


def test_another_thread_runs_python_while_one_spins_and_its_change_ends_the_spin(spinner):
    words = np.zeros(16, np.int64)
    seen: list[int] = []
    spinning_thread = threading.Thread(
        target=lambda: seen.append(spinner.until_changed(words, 8, 0, spinner.turns(30.0), 0)))
    spinning_thread.start()
    time.sleep(0.01)
    total = sum(range(10_000))  # runs although the other thread spins: it holds no GIL
    words[8] = total
    spinning_thread.join(timeout=10)
    assert not spinning_thread.is_alive() and seen == [total]


def test_a_task_runner_that_cannot_be_built_leaves_the_spin(monkeypatch):
    """Where the native task runner fails to compile, the spin alone is built (threads
    then run chunks as gufunc calls)."""
    if spinning.spinner() is None:
        pytest.skip("no native spin on this platform")
    monkeypatch.setattr(spinning, "_RUNNER_IR", "this is no LLVM IR")
    monkeypatch.setattr(spinning, "_spinner", None)
    monkeypatch.setattr(spinning, "_failed", False)
    built = spinning.spinner()
    assert built is not None and not built.native
    words = np.array([3, 0], np.int64)
    assert built.until_changed(words, 0, 2, built.turns(10.0), 0) == 3
