"""coprof: a coroutine-aware profiler, with yappi's API.

    import coprof as yappi
    yappi.set_clock_type("wall")
    yappi.start()
    ...
    yappi.stop()
    yappi.get_func_stats().print_all()

This drives the same engine and CPython hook that `coprof record` preloads
(libcoprof-preload.so, in this package's lib/): no Python-level hook. In a process
that already runs under the preload, it drives the profiler that is there: a start and
a stop here are a toggle's, and the window is also written as the preload's next file.
Where it differs from yappi, and why: doc/python.md, "The Python API".
"""
import atexit
import os
import sys
import warnings

from . import _coprof
from ._stats import (FILTER_KEYS, SAVE_TYPES, SORT_KEYS, YChildFuncStat, YFuncStat,
                     YFuncStats, YTaskStat, YTaskStats, YThreadStat, YThreadStats, _choices,
                     atomic_write, context_stats, load, merge)

__all__ = [
    "start", "stop", "is_running", "clear_stats", "set_clock_type", "get_clock_type",
    "set_context_backend", "get_context_backend", "get_func_stats", "get_thread_stats",
    "get_task_stats", "get_greenlet_stats", "profile", "run", "dump", "convert2pstats", "YappiError", "CoprofError",
    "YFuncStats", "YFuncStat", "YChildFuncStat", "YThreadStats", "YThreadStat", "YTaskStats",
    "YTaskStat", "SAVE_TYPES", "SORT_KEYS", "FILTER_KEYS",
]
__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.abspath(__file__))
CLOCK_TYPES = ("cpu", "wall")
CONTEXT_BACKENDS = ("native_thread", "greenlet")
# _coprof.state() bits (lifecycle/api.c)
_SETUP, _PRELOAD, _RUNNING, _WALL, _SAMPLE = 1, 2, 4, 8, 16
_ENODATA = -10001  # coprof.h: no event was recorded


class CoprofError(RuntimeError):
    """A call that cannot be done in this state (the clock of a profiler that exists)."""


YappiError = CoprofError

_clock = "cpu"  # yappi's default
_backend = "native_thread"
_bound = None  # None: not yet; True: the preloaded shim's doors; False: ours
_windows = []  # files of the windows stopped since the last clear_stats (oldest first)
_tmp = None
_next_window = None  # where the next stop() writes its window
_nwindows = 0
_next_pid = 0


def shim_path():
    """The package's libcoprof-preload.so."""
    return os.path.join(_HERE, "lib", "libcoprof-preload.so")


def command_path():
    """The package's `coprof` command (bin/coprof), which `python -m coprof` runs."""
    return os.path.join(_HERE, "bin", "coprof")


def _bind():
    global _bound
    if _bound is None:
        _bound = _coprof.bind(shim_path())
    return _bound


def _state():
    _bind()
    return _coprof.state()


def _tmpdir():
    global _tmp
    if _tmp is None:
        import shutil  # here: `import coprof` stays cheap (shutil imports bz2, lzma)
        import tempfile
        _tmp = tempfile.mkdtemp(prefix="coprof-api-")
        owner = os.getpid()

        def remove(path=_tmp):
            if os.getpid() == owner:  # not a forked child's exit: the folder is ours
                shutil.rmtree(path, True)
        atexit.register(remove)
    return _tmp


def _say(msg):
    warnings.warn("coprof: " + msg, RuntimeWarning, stacklevel=3)


def _raise_for(rc, path):
    if rc < 0 and rc > -4096:
        raise OSError(-rc, os.strerror(-rc), os.fspath(path))
    raise OSError("cannot write %s: %s" % (path, _coprof.strerror(rc)))


def is_running():
    """True while a window is open (started here, or by the preload or a toggle)."""
    if _bound is None and not _coprof_preloaded():
        return False
    return bool(_state() & _RUNNING)


def _coprof_preloaded():
    return "libcoprof-preload" in os.environ.get("LD_PRELOAD", "")


def set_clock_type(type):
    """"cpu" (each context's own CPU time) or "wall". Case does not matter, as in yappi.
    Raises while profiling runs, and when the process's profiler exists with the other
    clock (the preload's COPROF_CLOCK, or an earlier start()): an engine's clock is
    chosen once."""
    global _clock
    if not isinstance(type, str) or type.lower() not in CLOCK_TYPES:
        raise _choices("clock type", type, CLOCK_TYPES)
    type = type.lower()
    if is_running():
        raise CoprofError("the clock cannot change while profiling runs; stop() first")
    if (_bound is not None or _coprof_preloaded()) and _state() & _SETUP and \
            bool(_state() & _WALL) != (type == "wall"):
        raise CoprofError("this process's profiler runs the %s clock (%s), chosen once"
                          % ("wall" if _state() & _WALL else "cpu",
                             "the preload's COPROF_CLOCK" if _state() & _PRELOAD
                             else "at the first start()"))
    _clock = type


def get_clock_type():
    """The clock: the preload's when the process runs under it, else the one set."""
    if (_bound is not None or _coprof_preloaded()) and _state() & _SETUP:
        return "wall" if _state() & _WALL else "cpu"
    return _clock


def set_context_backend(type):
    """"native_thread" or "greenlet". coprof follows threads, asyncio tasks and
    greenlets at once (each greenlet is a task), so this only checks the name and is
    remembered for get_context_backend()."""
    global _backend
    if not isinstance(type, str) or type.lower() not in CONTEXT_BACKENDS:
        raise _choices("context backend", type, CONTEXT_BACKENDS)
    if is_running():
        raise CoprofError("the context backend cannot change while profiling runs")
    _backend = type.lower()


def get_context_backend():
    return _backend


def start(builtins=False, profile_threads=True):
    """Starts profiling every thread (profile_threads is accepted; coprof always
    follows every thread). builtins=True also keys C builtins, as the first start()
    in the process chooses. Starting twice does nothing and says so."""
    if is_running():
        _say("start(): profiling is already running; nothing done")
        return
    _bind()
    global _next_window, _next_pid
    _next_window = _window_path()  # now, not in stop() while the hook is on
    _next_pid = os.getpid()
    try:
        _coprof.setup(_clock == "wall", bool(builtins))
    except ValueError as e:  # the process's profiler has the other clock
        raise CoprofError(str(e)) from None
    rc = _coprof.start()
    if rc == 1:
        _say("start(): a window was open already (the preload's); nothing done")
    elif rc < 0:
        raise CoprofError("cannot start profiling: %s" % _coprof.strerror(rc))


def _window_path():
    global _nwindows
    _nwindows += 1
    # The pid: a forked child shares the folder and the numbering with its parent.
    return os.path.join(_tmpdir(), "window-%d-%d.pstat" % (os.getpid(), _nwindows))


def stop():
    """Stops profiling; the stats stay until clear_stats(). Stopping when nothing
    runs does nothing and says so."""
    # The hook goes off first thing: nothing of stop()'s own is recorded.
    global _next_window
    if _bound is None and _coprof_preloaded():
        _bind()  # the preload's window, opened without start()
    path = _next_window
    if path is None or _next_pid != os.getpid():  # none made yet, or a forked child's
        # parent's: the child writes a file of its own
        path = _window_path()
    _next_window = None
    rc, dumped = _coprof.stop(path) if _bound is not None else (1, 0)
    if rc == 1:
        _say("stop(): profiling is not running; nothing done")
        return
    if dumped == 0:
        # Not preloaded, the engine keeps every window's data: the newest file holds
        # them all. Preloaded, each stop ends and clears a window: the files add up.
        if not (_state() & _PRELOAD):
            for old in _windows:
                os.unlink(old)
            _windows[:] = []
        _windows.append(path)
    elif dumped != _ENODATA:
        _say("stop(): the profile could not be kept: %s" % _coprof.strerror(dumped))


def clear_stats():
    """Forgets the stats. While profiling runs, what was recorded since the start
    stays (the engine clears only between windows), and this says so."""
    for old in _windows:
        try:
            os.unlink(old)
        except OSError:
            pass
    _windows[:] = []
    if _bound is None:
        return
    if is_running():
        _say("clear_stats(): profiling is running; the window open now is kept")
        return
    if not (_state() & _PRELOAD):
        _coprof.clear()


def _profile():
    """(stats, extras) of everything recorded since the last clear_stats()."""
    files = list(_windows)
    if _bound is not None and is_running():
        path = os.path.join(_tmpdir(), "now-%d.pstat" % os.getpid())
        rc = _coprof.dump(path)
        if rc == 0:
            # Not preloaded, the engine holds the earlier windows too.
            files = files + [path] if _state() & _PRELOAD else [path]
    if not files:
        return {}, {"clock": get_clock_type()}
    return merge([load(f) for f in files])


def get_func_stats(tag=None, ctx_id=None, filter=None, filter_callback=None):
    """The functions recorded, as yappi's YFuncStats. While profiling runs, the stats
    up to now (a snapshot; profiling goes on), which it says."""
    if is_running():
        _say("get_func_stats(): profiling is running; these are the stats up to now")
    flt = dict(filter or {})
    if tag is not None:
        flt["tag"] = tag
    ctx_id = flt.pop("ctx_id", ctx_id)
    stats, extras = _profile()
    if ctx_id is not None:
        stats, name = context_stats(extras, ctx_id)
        out = YFuncStats(stats or {}, extras)
        for s in out:
            s.ctx_id, s.ctx_name = ctx_id, name
    else:
        out = YFuncStats(stats, extras)
    if flt or filter_callback:
        out = out.filtered(flt, filter_callback)
    return out


def get_thread_stats():
    """The threads: name, id, tid, ttot, sched_count (context switches)."""
    _, extras = _profile()
    return YThreadStats([YThreadStat(i, t) for i, t in enumerate(extras.get("threads", []))],
                        get_clock_type())


def get_task_stats():
    """The tasks (asyncio tasks, greenlets, C coroutines): name, id, ttot, state,
    runtime, thread, resumes."""
    _, extras = _profile()
    n = len(extras.get("threads", []))
    return YTaskStats([YTaskStat(n + i, t) for i, t in enumerate(extras.get("tasks", []))],
                      get_clock_type())


def get_greenlet_stats():
    """The greenlets that ran (each a task of runtime "greenlet")."""
    _, extras = _profile()
    n = len(extras.get("threads", []))
    return YTaskStats([YTaskStat(n + i, t) for i, t in enumerate(extras.get("tasks", []))
                       if t.get("runtime") == "greenlet"], get_clock_type())


def convert2pstats(stats):
    """yappi.convert2pstats: a pstats.Stats of a YFuncStats (get_func_stats())."""
    import pstats
    import tempfile
    with tempfile.TemporaryDirectory(prefix="coprof-pstats-") as d:
        path = os.path.join(d, "stats.pstat")
        stats.save(path, type="pstat")
        return pstats.Stats(path)


def dump(path):
    """Writes the profile so far to `path`: the file the preload writes, extras
    included (coprof report/view/export, pstats and snakeviz read it). OSError with
    the OS's reason when it cannot be written (no file is left then)."""
    path = os.fspath(path)
    if _bound is not None and is_running() and not (_state() & _PRELOAD and _windows):
        rc = _coprof.dump(path)
        if rc != 0:
            if rc == _ENODATA:
                raise CoprofError("nothing was recorded yet")
            _raise_for(rc, path)
        return
    if not _windows and not is_running():
        raise CoprofError("nothing was recorded: start() and stop() first")
    stats, extras = _profile()
    import marshal
    data = marshal.dumps(stats) + marshal.dumps(extras)
    atomic_write(path, lambda f: f.write(data))


class run:
    """yappi.run(): `with coprof.run():` profiles the block (start, then stop at its
    end). A class, not contextlib's: `import coprof` imports no more than it needs."""

    def __init__(self, builtins=False, profile_threads=True):
        self.builtins, self.profile_threads = builtins, profile_threads

    def __enter__(self):
        start(builtins=self.builtins, profile_threads=self.profile_threads)
        return self

    def __exit__(self, *exc):
        stop()
        return False


class profile:
    """with coprof.profile(clock="cpu", out="f.pstat") as p: ...
    profiles the block (the stats are cleared first), writes `out` if given, and keeps
    the stats in p.stats (a YFuncStats)."""

    def __init__(self, clock="cpu", out=None, builtins=False):
        if not isinstance(clock, str) or clock.lower() not in CLOCK_TYPES:
            raise _choices("clock type", clock, CLOCK_TYPES)
        self.clock, self.out, self.builtins = clock.lower(), out, builtins
        self.stats = None

    def __enter__(self):
        set_clock_type(self.clock)
        clear_stats()
        start(builtins=self.builtins)
        return self

    def __exit__(self, *exc):
        stop()
        self.stats = get_func_stats()
        if self.out is not None and _windows:
            dump(self.out)
        return False

    def get_func_stats(self):
        return self.stats


def main(argv=None):
    """`python -m coprof ARGS` and the `coprof` script: the package's command."""
    argv = sys.argv[1:] if argv is None else argv
    exe = command_path()
    try:
        os.execv(exe, ["coprof"] + list(argv))
    except OSError as e:
        sys.exit("coprof: cannot run %s: %s" % (exe, e.strerror))
