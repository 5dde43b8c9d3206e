"""The floating-point error handling the traced function sets for its own operations.

``np.errstate`` blocks, ``np.seterr``/``np.seterrcall`` and warnings filters run for real
while a function is traced.  numpy applies them to the operations that run under them, so
each operation node records the handling in force where it was traced (``current()``,
an ``ErrState`` or None) and the runtime applies it around the kernel or numpy call that
computes it.

What the function *set* must be told apart from what it inherits (the caller's state at
call time, which is not known while tracing): numpy makes every error state with
``_make_extobj`` (``errstate``, ``seterr``, ``seterrcall``), so while a function is traced
that name is a wrapper recording, for each state made, the categories and handler the
function gave, on top of those of the state it was made in.  States made by numfuse's own
code are transparent (they keep the function's choices); any state not recorded is the
caller's.  Warnings filters are compared with those in force when tracing began: entries
added in front are the function's (``warnings.simplefilter``/``filterwarnings`` inside
``warnings.catch_warnings()``), any other change replaces the caller's list.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy._core import _ufunc_config as _numpy_config

from ..graph import CALLERS, ERROR_CATEGORIES, ErrState

# numpy's module making error states (errstate, seterr, seterrcall call its _make_extobj)
_ufunc_config: Any = _numpy_config
_MAKE_EXTOBJ = _ufunc_config._make_extobj
_GET_EXTOBJ_DICT = _ufunc_config._get_extobj_dict  # what np.geterr and np.seterr return
_EXTOBJ = _ufunc_config._extobj_contextvar
_patch_lock = threading.Lock()
_patch_depth = 0


class _Recorder:
    """The error states made while one function is traced, and the filters it began with."""

    def __init__(self) -> None:
        # id(state) -> (state, (modes, call) the function chose), the state kept alive
        # so that its id is not reused while tracing.
        self.made: dict[int, tuple[Any, tuple[tuple[tuple[str, str], ...], Any]]] = {}
        self.filters = list(warnings.filters)
        self.interned: dict[ErrState, ErrState] = {}

    def chosen(self, state: Any) -> tuple[tuple[tuple[str, str], ...], Any]:
        entry = self.made.get(id(state))
        return entry[1] if entry is not None else ((), CALLERS)

    def record(self, state: Any, options: dict[str, Any], own: bool) -> None:
        modes, call = self.chosen(_EXTOBJ.get())
        if own:
            chosen = dict(modes)
            every = options.get("all")
            for category in ERROR_CATEGORIES:
                mode = options.get(category)
                if mode is None:
                    mode = every
                if isinstance(mode, _Callers):  # np.seterr(**old): the caller's again
                    chosen.pop(category, None)
                elif mode is not None:
                    chosen[category] = mode
            modes = tuple((category, chosen[category]) for category in ERROR_CATEGORIES
                          if category in chosen)
            if "call" in options:
                call = options["call"]
        self.made[id(state)] = (state, (modes, call))

    def current(self) -> ErrState | None:
        modes, call = self.chosen(_EXTOBJ.get())
        filters = warnings.filters
        added: tuple[tuple[Any, ...], ...] = ()
        own_filters = False
        if filters != self.filters:
            start = len(filters) - len(self.filters)
            if start > 0 and filters[start:] == self.filters:
                added = tuple(filters[:start])
            else:
                added, own_filters = tuple(filters), True
        if not (modes or added or own_filters) and call is CALLERS:
            return None
        state = ErrState(modes, call, added, own_filters)
        return self.interned.setdefault(state, state)


_recorder: contextvars.ContextVar[_Recorder | None] = contextvars.ContextVar(
    "numfuse_errstate_recorder", default=None)


def _make_extobj(*args: Any, **options: Any) -> Any:
    """numpy's ``_make_extobj`` (every error state numpy makes), noting what a traced
    function chose."""
    state = _MAKE_EXTOBJ(*args, **options)
    recorder = _recorder.get()
    if recorder is not None:
        # The frame setting the state: the caller of errstate.__enter__/seterr/...; a
        # function decorated with @np.errstate(...) sets its own, whoever calls it
        caller = sys._getframe(2).f_globals.get("__name__", "")
        own = sys._getframe(1).f_code is _DECORATED or not caller.startswith("numfuse.")
        recorder.record(state, options, own=own)
    return state


class _Callers(str):
    """The mode of a category the traced function has not set, as ``np.geterr()`` or
    ``np.seterr()`` give it while tracing: the caller's, not known then.  Given back
    (``np.seterr(**old)``), the category is the caller's again."""


def _get_extobj_dict() -> dict[str, Any]:
    """numpy's current error state as a dict, the categories the function has not set
    marked as the caller's (``_Callers``)."""
    found: dict[str, Any] = _GET_EXTOBJ_DICT()
    recorder = _recorder.get()
    if recorder is not None:
        modes = dict(recorder.chosen(_EXTOBJ.get())[0])
        for category in ERROR_CATEGORIES:
            if category in found and category not in modes:
                found[category] = _Callers(found[category])
    return found


# the code of a function decorated with @np.errstate(...), which makes its state
_DECORATED = np.errstate()(lambda: None).__code__


@contextlib.contextmanager
def recording() -> Iterator[None]:
    """Record the error handling the function being traced chooses (see ``current``)."""
    global _patch_depth
    with _patch_lock:
        if _patch_depth == 0:
            _ufunc_config._make_extobj = _make_extobj
            _ufunc_config._get_extobj_dict = _get_extobj_dict
        _patch_depth += 1
    token = _recorder.set(_Recorder())
    try:
        yield
    finally:
        _recorder.reset(token)
        with _patch_lock:
            _patch_depth -= 1
            if _patch_depth == 0:
                _ufunc_config._make_extobj = _MAKE_EXTOBJ
                _ufunc_config._get_extobj_dict = _GET_EXTOBJ_DICT


def _after_fork_in_child() -> None:
    """A child forked while another thread traced: numpy's own ``_make_extobj`` again."""
    global _patch_depth, _patch_lock
    _ufunc_config._make_extobj = _MAKE_EXTOBJ
    _ufunc_config._get_extobj_dict = _GET_EXTOBJ_DICT
    _patch_depth, _patch_lock = 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def current() -> ErrState | None:
    """The error handling the traced function has set for an operation traced now; None
    when it has set none (the caller's applies) or nothing is being traced."""
    recorder = _recorder.get()
    return None if recorder is None else recorder.current()

