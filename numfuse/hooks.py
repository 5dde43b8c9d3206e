"""Compile events and their subscribers.

Every time numfuse compiles a new kernel it calls each registered hook with a
``CompileEvent``.  A kernel found in the in-memory kernel cache (the same region structure
and dtypes compiled earlier in this process, by any function) is not compiled and sends no
event.  A kernel loaded from the disk cache (``numfuse.cache``) instead of compiled sends an
event with ``from_cache=True``; its ``compile_time`` is the time loading took.

The event's LLVM IR and assembly are produced only when read.  Hooks run in registration
order after the kernel is built, outside numfuse's locks; an exception in a hook becomes a
``HookWarning`` and never stops the compile.

Two built-in behaviours read the environment at each compile:

* ``NUMFUSE_DUMP_DIR=path`` writes ``<kernel>.py``, ``<kernel>.ll`` and ``<kernel>.s``.
* ``NUMFUSE_DEBUG=1`` (any level >= 1) prints the graph, regions and kernel sources to
  stderr as they are built; level 2 adds each kernel's vectorisation report.

A function jitted with ``background=True`` runs its first calls with numpy while its
kernels compile on a worker thread (``numfuse.background``); its compile events are sent
from that thread.  Hooks registered with ``register_calls`` receive a ``CallEvent`` for
each of those calls (``path="numpy"``) and for the first call that runs the kernels
(``path="kernels"``).

>>> import numfuse
>>> @numfuse.hooks.register
... def show(event):
...     print(event.name, event.compile_time)
>>> numfuse.hooks.unregister(show)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import Graph, Node
    from .kernel import Kernel


class HookWarning(RuntimeWarning):
    """A compile hook raised; the compile went on without it."""


@dataclasses.dataclass(frozen=True, eq=False)
class CompileEvent:
    """One kernel compile: what was compiled, how long it took, and lazy views of the code.

    ``function`` is the qualified name of the user's function being compiled (the kernel
    may later be shared by other functions with the same region structure).
    """

    kernel: Kernel
    function: str
    compile_time: float
    from_cache: bool = False

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def graph(self) -> Graph:
        """The region as a standalone graph (``str()`` prints it)."""
        return self.kernel.graph

    @property
    def nodes(self) -> tuple[Node, ...]:
        return self.kernel.nodes

    @property
    def source(self) -> str:
        return self.kernel.source

    @property
    def layout(self) -> str:
        return self.kernel.layout

    @property
    def llvm_ir(self) -> str:
        """Optimised LLVM IR, produced when first read."""
        return self.kernel.llvm_ir()

    @property
    def asm(self) -> str:
        """Assembly, produced when first read."""
        return self.kernel.asm()


@dataclasses.dataclass(frozen=True)
class CallEvent:
    """A call of a function whose kernels compile in the background, and which path ran
    it: ``"numpy"`` (the kernels were not ready; the function ran with numpy) or
    ``"kernels"`` (the first call on the compiled kernels)."""

    function: str
    path: str
    signature: str


Hook = Callable[[CompileEvent], object]
CallHook = Callable[[CallEvent], object]

_hooks: list[Hook] = []
_call_hooks: list[CallHook] = []
_lock = threading.Lock()


def register(hook: Hook) -> Hook:
    """Call ``hook(event)`` at every kernel compile; returns ``hook`` (usable as decorator)."""
    with _lock:
        _hooks.append(hook)
    return hook


def unregister(hook: Hook) -> None:
    """Stop calling ``hook``; a hook that is not registered is ignored."""
    with _lock, contextlib.suppress(ValueError):
        _hooks.remove(hook)


def registered() -> tuple[Hook, ...]:
    with _lock:
        return tuple(_hooks)


@contextlib.contextmanager
def recording() -> Iterator[list[CompileEvent]]:
    """Collect the compile events of a ``with`` block into a list."""
    events: list[CompileEvent] = []
    register(events.append)
    try:
        yield events
    finally:
        unregister(events.append)


def register_calls(hook: CallHook) -> CallHook:
    """Call ``hook(event)`` with a ``CallEvent`` for the calls of functions compiling in
    the background; returns ``hook``."""
    with _lock:
        _call_hooks.append(hook)
    return hook


def unregister_calls(hook: CallHook) -> None:
    with _lock, contextlib.suppress(ValueError):
        _call_hooks.remove(hook)


@contextlib.contextmanager
def recording_calls() -> Iterator[list[CallEvent]]:
    """Collect the call events of a ``with`` block into a list."""
    events: list[CallEvent] = []
    register_calls(events.append)
    try:
        yield events
    finally:
        unregister_calls(events.append)


def emit_call(event: CallEvent) -> None:
    """Run every call hook on ``event``; hooks never raise here."""
    with _lock:
        hooks = tuple(_call_hooks)
    for hook in hooks:
        try:
            hook(event)
        except Exception as error:
            name = getattr(hook, "__qualname__", repr(hook))
            warnings.warn(f"numfuse call hook {name} raised {error!r} for a call of "
                          f"{event.function}", HookWarning, stacklevel=3)


def emit(event: CompileEvent) -> None:
    """Run the built-in behaviours and every hook on ``event``; hooks never raise here."""
    for hook in (_dump, *registered()):
        try:
            hook(event)
        except Exception as error:  # a hook must never break the compile
            name = getattr(hook, "__qualname__", repr(hook))
            warnings.warn(f"numfuse compile hook {name} raised {error!r} for kernel "
                          f"{event.name}; the compile went on", HookWarning, stacklevel=2)


def _dump(event: CompileEvent) -> None:
    directory = os.environ.get("NUMFUSE_DUMP_DIR")
    if not directory:
        return
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{event.name}.py").write_text(event.source)
    (path / f"{event.name}.ll").write_text(event.llvm_ir)
    (path / f"{event.name}.s").write_text(event.asm)


def debug_level() -> int:
    """``NUMFUSE_DEBUG`` as a level: unset or 0 is off, a non-number counts as 1."""
    value = os.environ.get("NUMFUSE_DEBUG", "").strip()
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        return 1
