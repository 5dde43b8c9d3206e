"""Waiting for another thread without the GIL and without sleeping: a native spin.

Waking a thread that sleeps (a lock, a condition, the GIL) costs a system call in the
waker and a wake-up in the sleeper: 20-40 µs each on the virtual machines measured, where
an idle virtual CPU halts.  A large kernel call of about 100 µs per thread cannot pay that
twice.  The threads running its chunks (``threads.py``) therefore wait for each other
on a word of memory, spinning in native code with the GIL released (a ctypes call), for a
bounded time only, and fall back to sleeping after it.

``spinner()`` compiles the spin once per process with llvmlite (an atomic load and the
CPU's spin-wait hint in a loop) and calibrates how long one turn takes; it is None where
that fails, and callers then only sleep.

**Chunks run natively** (x86-64): a split call whose chunks are plain calls of a kernel's
loop function (``threads.ThreadPolicy``) needs no Python in the threads at all.  Its
chunks are described in a *task* (an int64 array: the loop function's address, each
chunk's argument pointers and dimensions, the steps) and run by ``drain``: each thread
claims the next chunk with an atomic compare-and-swap on the task's *ticket* and calls the
loop function on it, until none is left.  A helper thread spinning in ``serve`` runs a
task it is handed without ever returning to Python, and the caller runs its share and
waits for the rest in ``run``, the GIL released throughout.  With Python chunks each
thread takes the GIL around every gufunc call, and a thread finding it taken sleeps and
is woken slowly: measured on a logp/grad at 1e6 split six ways, 267 µs for the Python
chunks against 250-290 µs for the whole call with native ones (one thread: 430 µs).

A ticket holds the task's generation, its chunk count and the next chunk to claim
(``ticket``): a helper late for one call can claim nothing of the next before the caller
has opened it, nor anything of a call that is over.  Each chunk reads and clears the
thread's floating-point flags (MXCSR) around the loop call and adds them to the task's,
which the caller reports as numpy would (``flag_names``).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import time
from typing import Any

import llvmlite.binding as llvm
import numpy as np

# The CPU's hint that a thread is spinning (it yields the core's shared resources).
_X86 = ("declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()")
_ARM = ("declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)")
_HINTS = {"x86_64": _X86, "amd64": _X86, "aarch64": _ARM, "arm64": _ARM}

# spin(word, seen, turns, grace, bump): add 1 to ``*bump`` unless it is null, then load
# ``*word`` (atomically, acquire) until it differs from ``seen`` or ``turns`` turns have
# passed; once it differs, spin ``grace`` turns more (see ``Spinner.until_changed``).
# Returns the last value loaded.
_IR = """
{declare}
define i64 @numfuse_spin(i64* %word, i64 %seen, i64 %turns, i64 %grace, i64* %bump)
    nounwind {{
entry:
  %bumping = icmp ne i64* %bump, null
  br i1 %bumping, label %add, label %loop
add:
  %before = atomicrmw add i64* %bump, i64 1 seq_cst
  br label %loop
loop:
  %turn = phi i64 [0, %entry], [0, %add], [%next, %again]
  %value = load atomic i64, i64* %word acquire, align 8
  %changed = icmp ne i64 %value, %seen
  br i1 %changed, label %linger, label %again
again:
  {hint}
  %next = add i64 %turn, 1
  %more = icmp ult i64 %next, %turns
  br i1 %more, label %loop, label %done
linger:
  %extra = phi i64 [0, %loop], [%extra_next, %linger_again]
  %lingering = icmp ult i64 %extra, %grace
  br i1 %lingering, label %linger_again, label %done
linger_again:
  {hint}
  %extra_next = add i64 %extra, 1
  br label %linger
done:
  ret i64 %value
}}
"""


# A task's words (an int64 array of ``TASK_WORDS``; the ticket, the finished count and the
# flags in cache lines of their own).
TICKET, DONE, FLAGS, FUNCTION, ARGS, DIMS, STEPS, NARGS, NDIMS = 0, 8, 16, 24, 25, 26, 27, 28, 29
TASK_WORDS = 32
_INDEX_BITS = 20  # a ticket: generation, then the chunk count, then the next chunk
MAX_CHUNKS = (1 << _INDEX_BITS) - 1
_GENERATIONS = 1 << (63 - 2 * _INDEX_BITS)
# MXCSR's exception flags, by numpy's names for them (denormal and inexact: not reported)
_MXCSR_FLAGS = (("invalid value", 0x1), ("divide by zero", 0x4), ("overflow", 0x8),
                ("underflow", 0x10))

# drain(task): claim chunks and run them until none is left.  run(task, count, turns):
# drain, then spin until ``count`` chunks have finished or ``turns`` turns have passed;
# returns the finished count.  serve(word, seen, turns, grace, bump, mode, task, asleep):
# spin as ``numfuse_spin``; a change of ``*word`` while ``*mode`` is not 0 runs
# ``drain(task)`` and spins on, a change while it is 0 returns (for Python to act on);
# when the turns are spent it sleeps (a futex on ``*word``, ``*asleep`` set) until
# ``wake(word, asleep)`` changes the word — never taking the GIL, which a thread busy in
# Python holds (a helper waiting for it had started a split call's chunks 90-120 µs late,
# and took it from the caller between calls: splits of a logp/grad at 1e6 took 550-600
# µs, its chunks 325 of them, against 250 µs when helpers stayed in native code).
_RUNNER_IR = """
declare void @llvm.x86.sse.stmxcsr(i8*)
declare void @llvm.x86.sse.ldmxcsr(i8*)
declare i64 @syscall(i64, ...)

define internal i64 @numfuse_take_flags() {{
  %slot = alloca i32, align 4
  %bytes = bitcast i32* %slot to i8*
  call void @llvm.x86.sse.stmxcsr(i8* %bytes)
  %state = load i32, i32* %slot
  %cleared = and i32 %state, -64
  store i32 %cleared, i32* %slot
  call void @llvm.x86.sse.ldmxcsr(i8* %bytes)
  %sse = and i32 %state, 63
  ; the x87 status word's flags too (same bits): the C library's feraiseexcept, which
  ; kernels call to report an integer overflow (MIN // -1), raises overflow there
  %word = call i16 asm sideeffect "fnstsw $0", "={{ax}},~{{dirflag}},~{{fpsr}},~{{flags}}"()
  call void asm sideeffect "fnclex", "~{{dirflag}},~{{fpsr}},~{{flags}}"()
  %x87 = zext i16 %word to i32
  %both = or i32 %sse, %x87
  %flags = and i32 %both, 63
  %wide = zext i32 %flags to i64
  ret i64 %wide
}}

define internal i64 @numfuse_field(i64* %task, i64 %index) {{
  %at = getelementptr i64, i64* %task, i64 %index
  %value = load i64, i64* %at
  ret i64 %value
}}

define void @numfuse_drain(i64* %task) nounwind {{
entry:
  %ticket_at = getelementptr i64, i64* %task, i64 {ticket}
  %done_at = getelementptr i64, i64* %task, i64 {done}
  %flags_at = getelementptr i64, i64* %task, i64 {flags}
  br label %claim
claim:
  %ticket = load atomic i64, i64* %ticket_at acquire, align 8
  %next = and i64 %ticket, {mask}
  %shifted = lshr i64 %ticket, {bits}
  %count = and i64 %shifted, {mask}
  %none = icmp uge i64 %next, %count
  br i1 %none, label %finish, label %take
take:
  %claimed = add i64 %ticket, 1
  %swap = cmpxchg i64* %ticket_at, i64 %ticket, i64 %claimed acq_rel acquire
  %won = extractvalue {{i64, i1}} %swap, 1
  br i1 %won, label %work, label %claim
work:
  %function_word = call i64 @numfuse_field(i64* %task, i64 {function})
  %function = inttoptr i64 %function_word to void (i8**, i64*, i64*, i8*)*
  %args_word = call i64 @numfuse_field(i64* %task, i64 {args})
  %dims_word = call i64 @numfuse_field(i64* %task, i64 {dims})
  %steps_word = call i64 @numfuse_field(i64* %task, i64 {steps})
  %nargs = call i64 @numfuse_field(i64* %task, i64 {nargs})
  %ndims = call i64 @numfuse_field(i64* %task, i64 {ndims})
  %args_index = mul i64 %next, %nargs
  %args_offset = shl i64 %args_index, 3
  %args_address = add i64 %args_word, %args_offset
  %args = inttoptr i64 %args_address to i8**
  %dims_index = mul i64 %next, %ndims
  %dims_offset = shl i64 %dims_index, 3
  %dims_address = add i64 %dims_word, %dims_offset
  %dims = inttoptr i64 %dims_address to i64*
  %steps = inttoptr i64 %steps_word to i64*
  %stale = call i64 @numfuse_take_flags()
  call void %function(i8** %args, i64* %dims, i64* %steps, i8* null)
  %raised = call i64 @numfuse_take_flags()
  %flags_before = atomicrmw or i64* %flags_at, i64 %raised seq_cst
  %done_before = atomicrmw add i64* %done_at, i64 1 release
  br label %claim
finish:
  ret void
}}

define i64 @numfuse_run(i64* %task, i64 %count, i64 %turns) nounwind {{
entry:
  call void @numfuse_drain(i64* %task)
  %done_at = getelementptr i64, i64* %task, i64 {done}
  br label %loop
loop:
  %turn = phi i64 [0, %entry], [%next, %again]
  %done = load atomic i64, i64* %done_at acquire, align 8
  %finished = icmp uge i64 %done, %count
  br i1 %finished, label %out, label %again
again:
  {hint}
  %next = add i64 %turn, 1
  %more = icmp ult i64 %next, %turns
  br i1 %more, label %loop, label %out
out:
  ret i64 %done
}}

define internal void @numfuse_sleep(i64* %word, i64 %seen, i64* %asleep) {{
entry:
  store atomic i64 1, i64* %asleep seq_cst, align 8
  %now = load atomic i64, i64* %word seq_cst, align 8
  %same = icmp eq i64 %now, %seen
  br i1 %same, label %wait, label %done
wait:
  %address = ptrtoint i64* %word to i64
  %low = and i64 %seen, 4294967295
  %ignored = call i64 (i64, ...) @syscall(i64 {futex}, i64 %address, i64 {futex_wait},
                                          i64 %low, i64 0)
  br label %done
done:
  store atomic i64 0, i64* %asleep seq_cst, align 8
  ret void
}}

define void @numfuse_wake(i64* %word, i64* %asleep) nounwind {{
entry:
  %before = atomicrmw add i64* %word, i64 1 seq_cst
  %sleeping = load atomic i64, i64* %asleep seq_cst, align 8
  %waiting = icmp ne i64 %sleeping, 0
  br i1 %waiting, label %wake, label %done
wake:
  %address = ptrtoint i64* %word to i64
  %ignored = call i64 (i64, ...) @syscall(i64 {futex}, i64 %address, i64 {futex_wake}, i64 1)
  br label %done
done:
  ret void
}}

define i64 @numfuse_serve(i64* %word, i64 %seen, i64 %turns, i64 %grace, i64* %bump,
                          i64* %mode, i64* %task, i64* %asleep) nounwind {{
entry:
  %first = call i64 @numfuse_spin(i64* %word, i64 %seen, i64 %turns, i64 0, i64* %bump)
  br label %loop
loop:
  %value = phi i64 [%first, %entry], [%later, %drained], [%woken, %slept]
  %last = phi i64 [%seen, %entry], [%value, %drained], [%last, %slept]
  %changed = icmp ne i64 %value, %last
  br i1 %changed, label %check, label %sleep
sleep:
  call void @numfuse_sleep(i64* %word, i64 %last, i64* %asleep)
  br label %slept
slept:
  %woken = load atomic i64, i64* %word acquire, align 8
  br label %loop
check:
  %kind = load atomic i64, i64* %mode acquire, align 8
  %native = icmp ne i64 %kind, 0
  br i1 %native, label %drain, label %linger
drain:
  call void @numfuse_drain(i64* %task)
  br label %drained
drained:
  %later = call i64 @numfuse_spin(i64* %word, i64 %value, i64 %turns, i64 0, i64* null)
  br label %loop
linger:
  %lingered = call i64 @numfuse_spin(i64* %word, i64 %value, i64 %grace, i64 0, i64* null)
  ret i64 %value
}}
"""
_NATIVE_MACHINES = ("x86_64", "amd64")
_FUTEX, _FUTEX_WAIT_PRIVATE, _FUTEX_WAKE_PRIVATE = 202, 128, 129  # Linux x86-64


def ticket(generation: int, count: int) -> int:
    """An open ticket: chunks 0 to ``count`` - 1 of task ``generation`` left to claim."""
    return ((generation % _GENERATIONS) << 2 * _INDEX_BITS) | (count << _INDEX_BITS)


def closed_ticket(generation: int) -> int:
    """A ticket with nothing to claim, set while a task is being written."""
    return ((generation % _GENERATIONS) << 2 * _INDEX_BITS) | MAX_CHUNKS


def flag_names(flags: int) -> set[str]:
    """numpy's names of the floating-point flags in a task's ``FLAGS`` word."""
    return {name for name, bit in _MXCSR_FLAGS if flags & bit}


def _data_offset() -> int | None:
    """Where a numpy array object keeps the address of its data (numpy's
    ``PyArrayObject_fields.data``, right after the object's header), found and checked on
    probes; None where objects are not laid out so (``id`` is no address, another header)."""
    probes = [np.empty(3), np.empty((4, 2))[1:, 1], np.zeros(0)]
    for offset in range(8, 72, 8):
        try:
            if all(ctypes.c_void_p.from_address(id(probe) + offset).value ==
                   probe.ctypes.data for probe in probes):
                return offset
        except (OverflowError, ValueError):  # pragma: no cover - not an address
            return None
    return None  # pragma: no cover - another numpy or Python


_DATA_OFFSET = _data_offset()
_pointer_at = ctypes.c_void_p.from_address


def data_address(array: np.ndarray[Any, Any]) -> int:
    """The address of ``array``'s data (an ``np.ndarray`` exactly): ``array.ctypes.data``,
    read in 0.1 µs instead of 1 µs where the array object's layout was found."""
    if _DATA_OFFSET is None:  # pragma: no cover - another numpy or Python
        return int(array.ctypes.data)
    return _pointer_at(id(array) + _DATA_OFFSET).value or 0


class Spinner:
    """The compiled spin and its speed: ``seconds_per_turn``; ``native`` when it also
    runs tasks (``drain``, ``run``, ``serve``)."""

    def __init__(self, native: bool | None = None) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()  # (the runner reads the x87 flags with asm)
        machine_name = platform.machine().lower()
        declare, hint = _HINTS.get(machine_name, ("", ""))
        text = _IR.format(declare=declare, hint=hint)
        if native is None:
            native = machine_name in _NATIVE_MACHINES and sys.platform.startswith("linux")
        self.native = native
        if self.native:
            text += _RUNNER_IR.format(
                hint=hint, ticket=TICKET, done=DONE, flags=FLAGS, function=FUNCTION,
                args=ARGS, dims=DIMS, steps=STEPS, nargs=NARGS, ndims=NDIMS,
                mask=MAX_CHUNKS, bits=_INDEX_BITS, futex=_FUTEX,
                futex_wait=_FUTEX_WAIT_PRIVATE, futex_wake=_FUTEX_WAKE_PRIVATE)
        module = llvm.parse_assembly(text)
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine(opt=2)
        self._engine = llvm.create_mcjit_compiler(module, machine)  # keeps the code alive
        self._engine.finalize_object()
        address = self._engine.get_function_address("numfuse_spin")
        # a ctypes call releases the GIL for its duration
        self._spin = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_int64,
                                      ctypes.c_void_p)(address)
        if self.native:
            word, pointer = ctypes.c_int64, ctypes.c_void_p
            function = self._engine.get_function_address
            self._drain = ctypes.CFUNCTYPE(None, pointer)(function("numfuse_drain"))
            self._run = ctypes.CFUNCTYPE(word, pointer, word, word)(function("numfuse_run"))
            self._serve = ctypes.CFUNCTYPE(word, pointer, word, word, word, pointer, pointer,
                                           pointer, pointer)(function("numfuse_serve"))
            self._wake = ctypes.CFUNCTYPE(None, pointer, pointer)(function("numfuse_wake"))
        still = np.zeros(1, np.int64)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            self._spin(still.ctypes.data, 0, 20_000, 0, None)
            best = min(best, (time.perf_counter() - start) / 20_000)
        self.seconds_per_turn = max(best, 1e-10)

    def turns(self, seconds: float) -> int:
        """How many turns of the spin take about ``seconds``."""
        return max(1, int(seconds / self.seconds_per_turn))

    def until_changed(self, words: np.ndarray[Any, Any], index: int, seen: int, turns: int,
                      grace: int, bump: int | None = None) -> int:
        """Spin, the GIL released, until ``words[index]`` (an int64 array's element)
        differs from ``seen`` or ``turns`` turns have passed; return its value then.
        Once it differs, spin ``grace`` turns more before taking the GIL back: the thread
        that changed it is still holding the GIL for a moment, and a thread that finds the
        GIL taken sleeps (and is woken slowly).  ``bump``: first add 1 to
        ``words[bump]``, once the GIL is released (a thread spinning on that word then
        knows this one no longer holds the GIL)."""
        base = data_address(words)
        return int(self._spin(base + index * words.itemsize, seen, turns, grace,
                              None if bump is None else base + bump * words.itemsize))

    def drain(self, task: np.ndarray[Any, Any]) -> None:
        """Run chunks of ``task`` until none is left to claim, the GIL released."""
        self._drain(data_address(task))

    def run(self, task: np.ndarray[Any, Any], count: int, turns: int) -> int:
        """``drain(task)``, then spin until ``count`` chunks have finished or ``turns``
        turns have passed; the number finished."""
        return int(self._run(data_address(task), count, turns))

    def serve(self, words: np.ndarray[Any, Any], index: int, seen: int, turns: int,
              grace: int, bump: int | None, mode: int, task: np.ndarray[Any, Any],
              asleep: int) -> int:
        """Wait for work on ``words[index]`` without the GIL: spin as ``until_changed``,
        then sleep until ``wake`` (``words[asleep]`` is 1 meanwhile).  A change while
        ``words[mode]`` is not 0 runs ``drain(task)`` and waits on; a change while it is
        0 returns the new value (work for Python)."""
        base, size = data_address(words), words.itemsize
        return int(self._serve(base + index * size, seen, turns, grace,
                               None if bump is None else base + bump * size,
                               base + mode * size, data_address(task), base + asleep * size))

    def wake(self, words: np.ndarray[Any, Any], index: int, asleep: int) -> None:
        """Add 1 to ``words[index]`` and wake the thread ``serve`` put to sleep on it."""
        base, size = data_address(words), words.itemsize
        self._wake(base + index * size, base + asleep * size)


_lock = threading.Lock()
_spinner: Spinner | None = None
_failed = False
if hasattr(os, "register_at_fork"):  # a child never inherits the lock held
    os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release,
                        after_in_child=_lock.release)


def spinner() -> Spinner | None:
    """The process's ``Spinner``, built on first use; None where it cannot be built."""
    global _spinner, _failed
    with _lock:
        if _spinner is None and not _failed:
            for native in (None, False):  # the task runner, then the spin alone
                try:
                    _spinner = Spinner(native)
                    break
                except Exception:  # no native target, an unusual platform: sleep instead
                    continue
            _failed = _spinner is None
        return _spinner
