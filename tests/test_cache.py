"""The disk cache of compiled kernels: reuse across processes, concurrent writers, damaged
entries, unusable directories, ``cache=False``, ``numfuse.cache.info()/clear()`` and the
memory of a long-running cached function.

Every test compiles into its own temporary ``NUMFUSE_CACHE_DIR``.  Tests that need a fresh
process run Python in a subprocess; the others call ``backend.compile_gufunc`` directly
(it bypasses the in-memory kernel cache of ``api``) or compile kernels no other test uses.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numba
import numpy as np
import pytest
from conftest import assert_same

import numfuse
from numfuse import backend, hooks, vector_math
from numfuse.backend import store
from numfuse.cache import CacheInfo, CacheWarning

REPO = Path(numfuse.__file__).resolve().parent.parent
_fresh = itertools.count()


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """A cache directory of the test's own, read again by the backend."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("NUMFUSE_CACHE_DIR", str(directory))
    store.reset_cache_settings()
    yield directory
    monkeypatch.undo()
    store.reset_cache_settings()


def unique_constant() -> float:
    """A constant no kernel of this test run has used, so its kernel is new."""
    return 1.0 + (os.getpid() % 997) / 1e4 + next(_fresh) / 1e8


def scaled(constant: float):
    def fn(x, n):
        return (x - constant) * 3.0, n // 3 + x.astype(np.int64)   # floor_divide_int helper
    return fn


X = np.linspace(-2.0, 2.0, 11)
N = np.arange(-5, 6)


def kernel_of(fn, *args, cache=True):
    """Compile ``fn`` and return its (only) generated kernel source."""
    compiled = numfuse.compile(fn, *args, cache=cache)
    assert len(compiled.kernels) == 1
    return compiled.kernels[0].generated


def run_python(code: str, cache_dir: Path, *, check: bool = True) -> dict:
    """Run ``code`` in a fresh Python process using ``cache_dir``; it prints one JSON line
    last, which is returned."""
    environment = {**os.environ, "NUMFUSE_CACHE_DIR": str(cache_dir),
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                             env=environment, capture_output=True, text=True, timeout=300)
    if check:
        assert process.returncode == 0, process.stderr
    return json.loads(process.stdout.strip().splitlines()[-1])


LOGP_GRAD = """
import json, warnings
import numpy as np
import numfuse
from numfuse import hooks

warnings.simplefilter("error")          # any warning (a damaged entry too) fails the run

@numfuse.jit
def logp_and_grad(x, mu):
    d = x - mu
    return -(d ** 2) / 2, -d

x = np.linspace(-3.0, 3.0, 1001)
with hooks.recording() as events:
    logp, grad = logp_and_grad(x, 0.25)
d = x - 0.25
print(json.dumps({
    "from_cache": [event.from_cache for event in events],
    "correct": bool(np.array_equal(logp, -(d ** 2) / 2) and np.array_equal(grad, -d)),
    "names": [event.name for event in events],
}))
"""


def entry_files(cache_dir: Path) -> dict[str, int]:
    """Every file of the cache with its modification time (ns)."""
    return {str(path.relative_to(cache_dir)): path.stat().st_mtime_ns
            for path in sorted(cache_dir.rglob("*")) if path.is_file()}


# ------------------------------------------------------------------ across processes


def test_a_second_process_loads_the_kernel_from_disk_without_compiling(cache_dir):
    first = run_python(LOGP_GRAD, cache_dir)
    assert first == {"from_cache": [False], "correct": True, "names": first["names"]}
    files = entry_files(cache_dir)
    name = first["names"][0]
    assert any(path.endswith(f"{name}.nfk") for path in files)

    second = run_python(LOGP_GRAD, cache_dir)
    assert second == {"from_cache": [True], "correct": True, "names": first["names"]}
    # and nothing was written: the entry (and every other file) is unchanged
    assert entry_files(cache_dir) == files


INTEGER_POWER = """
import json
import numpy as np
import numfuse
from numfuse import hooks

n = np.arange(-3, 9)
with hooks.recording() as events:
    result = numfuse.jit(lambda a, b: a ** b)(n, np.abs(n) % 4)
try:
    numfuse.jit(lambda a, b: a ** b)(n, n)
    message = ""
except ValueError as error:
    message = str(error)
print(json.dumps({"from_cache": [event.from_cache for event in events], "message": message,
                  "correct": bool(np.array_equal(result, n ** (np.abs(n) % 4)))}))
"""


def test_a_kernel_that_reports_negative_integer_powers_is_cached(cache_dir):
    """Its C callback is called by a symbol the JIT resolves when it loads the code."""
    first = run_python(INTEGER_POWER, cache_dir)
    second = run_python(INTEGER_POWER, cache_dir)
    assert first["from_cache"] == [False] and second["from_cache"] == [True]
    for result in (first, second):
        assert result["correct"] and "negative integer powers" in result["message"]


def test_numba_cache_dir_does_not_move_numfuse_kernels(cache_dir, monkeypatch):
    numba_cache = cache_dir.parent / "numba-cache"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(numba_cache))
    assert run_python(LOGP_GRAD, cache_dir)["from_cache"] == [False]
    assert run_python(LOGP_GRAD, cache_dir)["from_cache"] == [True]
    assert not numba_cache.exists() or not any(numba_cache.rglob("*kernel_*"))


def test_two_processes_compiling_the_same_kernel_at_once(cache_dir):
    go = cache_dir.parent / "go"
    script = LOGP_GRAD.replace("with hooks.recording()", textwrap.dedent(f"""\
        import os, pathlib, time
        pathlib.Path({str(cache_dir.parent)!r}, f"ready-{{os.getpid()}}").touch()
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.001)
        with hooks.recording()"""))
    environment = {**os.environ, "NUMFUSE_CACHE_DIR": str(cache_dir),
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    processes = [subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=environment,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    try:
        while len(list(cache_dir.parent.glob("ready-*"))) < 2:
            assert all(process.poll() is None for process in processes)
            time.sleep(0.01)
        go.touch()                              # both are imported: compile now
        outputs = [process.communicate(timeout=300) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr
        result = json.loads(stdout.strip().splitlines()[-1])
        assert result["correct"]
    # the entry they left is intact: a third process loads it, with no warning
    third = run_python(LOGP_GRAD, cache_dir)
    assert third["from_cache"] == [True] and third["correct"]
    directory = next((cache_dir / "kernels").iterdir())
    name = third["names"][0]
    store.decode(store.entry_path(directory, name).read_bytes(), name)


# ------------------------------------------------------------------ damaged entries


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x80\x04not a pickle" * 7)


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _old_format(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"NUMFUSE-KERNEL 2", b"NUMFUSE-KERNEL 1", 1))


DAMAGE = {  # what happens to kernel {name}'s entry
    "truncated": _truncate,
    "garbage": _garbage,
    "one byte flipped": _flip_a_byte,
    "another format": _old_format,
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_entry_is_detected_recompiled_and_replaced(damage):
    constant = unique_constant()
    source = kernel_of(scaled(constant), X, N)            # compiled and saved
    DAMAGE[damage](store.entry_path(store.cache_directory(), source.name))

    with pytest.warns(CacheWarning, match=f"{source.name}.*damaged"):
        gufunc = backend.compile_gufunc(source)
    assert not backend.loaded_from_disk(gufunc)              # compiled again
    expected = scaled(constant)(X, N)
    assert_same(gufunc(X, N), expected)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = backend.compile_gufunc(source)            # the replaced entry loads
    assert backend.loaded_from_disk(again)
    assert_same(again(X, N), expected)


def test_the_entry_of_another_kernel_under_this_name_is_refused():
    first = kernel_of(scaled(unique_constant()), X, N)
    constant = unique_constant()
    second = kernel_of(scaled(constant), X, N)
    directory = store.cache_directory()
    shutil.copyfile(store.entry_path(directory, first.name),
                    store.entry_path(directory, second.name))
    with pytest.warns(CacheWarning, match="holds kernel"):
        gufunc = backend.compile_gufunc(second)
    assert not backend.loaded_from_disk(gufunc)
    assert_same(gufunc(X, N), scaled(constant)(X, N))


# ------------------------------------------------------------------ unusable directories


def _compile_two_new_kernels() -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            constant = unique_constant()
            result = numfuse.jit(scaled(constant))(X, N)
            assert_same(result, scaled(constant)(X, N))
    return [warning for warning in caught if issubclass(warning.category, CacheWarning)]


def test_a_directory_that_cannot_be_created_works_without_the_cache_and_warns_once(
        cache_dir, monkeypatch):
    blocker = cache_dir.parent / "a file"
    blocker.write_text("")
    monkeypatch.setenv("NUMFUSE_CACHE_DIR", str(blocker / "cache"))
    store.reset_cache_settings()
    caught = _compile_two_new_kernels()
    assert len(caught) == 1
    assert "cannot use its kernel cache" in str(caught[0].message)
    assert blocker.read_text() == ""


def test_a_directory_removed_while_running_is_created_again(cache_dir):
    kernel_of(scaled(unique_constant()), X, N)
    shutil.rmtree(cache_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        source = kernel_of(scaled(unique_constant()), X, N)
    assert store.entry_path(store.cache_directory(), source.name).exists()


READ_ONLY = """
import json, warnings
import numpy as np
import numfuse
from numfuse.cache import CacheWarning

x = np.linspace(-1.0, 1.0, 9)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a = numfuse.jit(lambda x: x * 2.5 - 1)(x)
    b = numfuse.jit(lambda x: x * 3.5 + 1)(x)
print(json.dumps({
    "correct": bool(np.array_equal(a, x * 2.5 - 1) and np.array_equal(b, x * 3.5 + 1)),
    "warnings": [str(w.message) for w in caught if issubclass(w.category, CacheWarning)],
}))
"""


def test_a_read_only_directory_works_without_the_cache_and_warns_once(cache_dir):
    cache_dir.mkdir()
    code = READ_ONLY
    if os.geteuid() == 0:   # root writes through permission bits: mount it read-only instead
        if shutil.which("unshare") is None:
            pytest.skip("running as root without unshare(1) to make a read-only directory")
        probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip("running as root and cannot make a read-only bind mount")
        mount = (f"import subprocess\nsubprocess.run(['mount', '--bind', {str(cache_dir)!r}, "
                 f"{str(cache_dir)!r}], check=True)\nsubprocess.run(['mount', '-o', "
                 f"'remount,bind,ro', {str(cache_dir)!r}], check=True)\n")
        code = mount + READ_ONLY
        script = cache_dir.parent / "read_only.py"
        script.write_text(code)
        environment = {**os.environ, "NUMFUSE_CACHE_DIR": str(cache_dir),
                       "PYTHONPATH": os.pathsep.join([str(REPO),
                                                      os.environ.get("PYTHONPATH", "")])}
        process = subprocess.run(["unshare", "-m", sys.executable, str(script)], cwd=REPO,
                                 env=environment, capture_output=True, text=True, timeout=300)
        assert process.returncode == 0, process.stderr
        result = json.loads(process.stdout.strip().splitlines()[-1])
    else:
        cache_dir.chmod(0o555)
        try:
            result = run_python(code, cache_dir)
        finally:
            cache_dir.chmod(0o755)
    assert result["correct"]
    assert len(result["warnings"]) == 1 and "cannot use its kernel cache" in result["warnings"][0]
    assert list(cache_dir.iterdir()) == []


# ------------------------------------------------------------------ opting out


def test_cache_false_writes_nothing_persistent(cache_dir):
    constant = unique_constant()
    jitted = numfuse.jit(scaled(constant), cache=False)
    with hooks.recording() as events:
        assert_same(jitted(X, N), scaled(constant)(X, N))
    assert [event.from_cache for event in events] == [False]
    assert not cache_dir.exists()
    # numfuse.compile follows the Jitted's setting, and has its own
    numfuse.compile(jitted, X[:, None], N[:, None])
    numfuse.compile(scaled(unique_constant()), X, N, cache=False)
    assert not cache_dir.exists()


def test_cache_false_does_not_load_from_the_cache_either(cache_dir):
    run_python(LOGP_GRAD, cache_dir)
    result = run_python(LOGP_GRAD.replace("@numfuse.jit\n", "@numfuse.jit(cache=False)\n"),
                        cache_dir)
    assert result["from_cache"] == [False] and result["correct"]


# ------------------------------------------------------------------ the key


def test_the_key_holds_every_version_and_the_code_kernels_are_made_of():
    material = store.cache_key_material()
    assert material["numba"] == numba.__version__
    assert material["numpy"] == np.__version__
    assert {"llvmlite", "code", "numfuse", "cpu", "python"} <= set(material)


def test_a_changed_kernel_library_selects_another_directory(tmp_path, monkeypatch):
    from numfuse import kernel_lib

    before = store.cache_directory()
    changed = tmp_path / "kernel_lib.py"
    changed.write_bytes(Path(kernel_lib.__file__).read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(kernel_lib, "__file__", str(changed))
    store._fixed_key_material.cache_clear()
    try:
        assert store.cache_directory() != before
    finally:
        monkeypatch.undo()
        store._fixed_key_material.cache_clear()
    assert store.cache_directory() == before


def test_extra_key_material_selects_another_directory(monkeypatch):
    before = store.cache_directory()
    monkeypatch.setattr(store, "extra_key_material", lambda: {"vector library": "libmvec"})
    assert store.cache_directory() != before


def test_the_vector_math_mode_selects_another_directory(monkeypatch):
    before = store.cache_directory()
    assert store.cache_key_material()["vector_math"] in ("on", "off")
    monkeypatch.setattr(vector_math, "ENABLED", not vector_math.ENABLED)
    assert store.cache_directory() != before


# ------------------------------------------------------------------ cached kernels are whole


def test_a_kernel_loaded_from_disk_can_be_inspected():
    constant = unique_constant()
    source = kernel_of(scaled(constant), X, N)
    gufunc = backend.compile_gufunc(source)
    assert backend.loaded_from_disk(gufunc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f"@{backend.kernel_symbol(gufunc)}(" in backend.llvm_ir(gufunc)
        assert backend.kernel_symbol(gufunc) in backend.asm(gufunc)
    assert_same(gufunc(X, N), scaled(constant)(X, N))


# ------------------------------------------------------------------ info and clear


def test_info_and_clear(cache_dir):
    empty = numfuse.cache.info()
    assert isinstance(empty, CacheInfo) and (empty.kernels, empty.size) == (0, 0)
    for _ in range(2):
        kernel_of(scaled(unique_constant()), X, N)
    stale = cache_dir / "kernels" / "0123456789abcdef"
    stale.mkdir()
    (stale / "kernel_0.py").write_text("x = 1\n")

    report = numfuse.cache.info()
    assert report.kernels == 2 and report.size > 0
    assert (report.stale, report.stale_size) == (1, 6)
    assert report.current == store.cache_directory()
    assert str(cache_dir / "kernels") in repr(report) and "2 kernels" in repr(report)
    assert "1 stale directory (6 bytes)" in repr(report)

    assert numfuse.cache.clear(stale_only=True) == 6
    assert not stale.exists() and numfuse.cache.info().kernels == 2
    assert numfuse.cache.clear() == report.size
    assert numfuse.cache.info().kernels == 0
    kernel_of(scaled(unique_constant()), X, N)           # compiling again works
    assert numfuse.cache.info().kernels == 1


def test_the_command_line(cache_dir):
    kernel_of(scaled(unique_constant()), X, N)
    environment = {**os.environ, "NUMFUSE_CACHE_DIR": str(cache_dir),
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

    def command(*arguments: str) -> str:
        process = subprocess.run([sys.executable, "-m", "numfuse.cache", *arguments],
                                 cwd=REPO, env=environment, capture_output=True, text=True,
                                 timeout=300)
        assert process.returncode == 0 and process.stderr == "", process.stderr
        return process.stdout

    assert "1 kernel," in command("info") and '"numba": ' in command("info")
    assert "removed" in command("clear")
    assert numfuse.cache.info().kernels == 0


# ------------------------------------------------------------------ memory


LONG_RUN = """
import json, os
import numpy as np
import numfuse
from numfuse import hooks

@numfuse.jit
def logp_and_grad(x, mu):
    d = x - mu
    return -(d ** 2) / 2, -d

def rss() -> int:
    with open("/proc/self/statm") as stream:
        return int(stream.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

x = np.linspace(-3.0, 3.0, 4096)     # two 32 kB outputs per call: a leak would be 6 GB
with hooks.recording() as events:
    logp_and_grad(x, 0.25)
for _ in range(2000):
    logp_and_grad(x, 0.25)
before = rss()
for _ in range(100_000):
    logp, grad = logp_and_grad(x, 0.25)
print(json.dumps({"growth": rss() - before, "from_cache": [e.from_cache for e in events],
                  "correct": bool(np.array_equal(grad, -(x - 0.25)))}))
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads RSS from /proc")
def test_a_cached_function_called_100_000_times_does_not_grow(cache_dir):
    run_python(LOGP_GRAD, cache_dir)                   # fill the cache
    result = run_python(LONG_RUN, cache_dir)
    assert result["from_cache"] == [True] and result["correct"]
    assert result["growth"] < 16 * 2**20, result      # leaking one output per call: 3 GB


def _double(x):
    return x * 2


def test_a_pickled_jitted_function_keeps_cache_false():
    import pickle

    restored = pickle.loads(pickle.dumps(numfuse.jit(_double, cache=False)))
    assert restored.cache is False
    assert_same(restored(X), X * 2)


_FORK_WHILE_UNPICKLING = """
import os, pickle, threading, time
import numpy as np, numfuse

x = np.linspace(0, 1, 100)
blobs = [pickle.dumps(numfuse.compile(lambda v, i=i: np.sin(v * (i + 0.5)) + v ** 3, x,
                                      cache=False).kernels[0]) for i in range(6)]
unpickling = threading.Thread(target=lambda: [pickle.loads(blob) for blob in blobs])
unpickling.start()
time.sleep(0.05)  # the thread is compiling an unpickled kernel
pid = os.fork()
if pid == 0:
    import faulthandler
    faulthandler.dump_traceback_later(60, exit=True)
    jitted = numfuse.jit(lambda v: np.tanh(v) * 7.25 - v)
    os._exit(0 if np.allclose(jitted(x), np.tanh(x) * 7.25 - x) else 1)
status = os.waitpid(pid, 0)[1]
unpickling.join()
print(status)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_fork_while_another_thread_unpickles_a_kernel_leaves_the_child_working(tmp_path):
    """Found by a conformance hunt: a fork while another thread compiled an unpickled
    kernel left the compiler's lock held in the child, which hung at its first compile."""
    script = tmp_path / "fork.py"
    script.write_text(_FORK_WHILE_UNPICKLING)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=240, check=False,
                          env={**os.environ, "NUMFUSE_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
