"""api_checks.py WORKDIR: the API's behaviour in one process, each check named as it
runs: bad input (ValueError naming the choices, OSError with the OS's reason and no
file left), calls out of order (said, harmless), the files it writes (read back by
pstats and by its own reader), tasks and threads, the context manager."""
import asyncio
import marshal
import os
import pstats
import resource
import signal
import sys
import time
import warnings

import coprof

work = sys.argv[1]
failed = []


def check(name):
    def deco(fn):
        try:
            fn()
            print("ok   %s" % name)
        except Exception as e:  # noqa: a failed check is reported, the others go on
            failed.append(name)
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        return fn
    return deco


def raises(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), "%r not in %r" % (w, str(e))
        return e
    raise AssertionError("%s not raised" % exc.__name__)


def warns(fn, *words):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = fn()
    text = " ".join(str(x.message) for x in w)
    for word in words:
        assert word in text, "%r not in warnings %r" % (word, text)
    return r


def burn(secs):
    t = time.process_time()
    while time.process_time() - t < secs:
        pass


async def job(i):
    await asyncio.sleep(0.02)
    burn(0.005)


async def jobs():
    await asyncio.gather(*[asyncio.create_task(job(i), name="job-%d" % i) for i in range(3)])


@check("bad names: ValueError naming the valid choices")
def _():
    raises(ValueError, lambda: coprof.set_clock_type("sundial"), "sundial", "cpu, wall")
    raises(ValueError, lambda: coprof.set_context_backend("fibers"), "native_thread, greenlet")
    raises(ValueError, lambda: coprof.profile(clock="tsc"), "cpu, wall")


@check("out of order: stop() without start(), get_func_stats() with nothing recorded")
def _():
    assert not coprof.is_running()
    warns(coprof.stop, "not running", "nothing done")
    assert len(coprof.get_func_stats()) == 0


@check("start twice, set_clock_type while running, get_func_stats while running")
def _():
    coprof.set_clock_type("cpu")
    coprof.start()
    warns(coprof.start, "already running", "nothing done")
    assert coprof.is_running()
    raises(coprof.CoprofError, lambda: coprof.set_clock_type("wall"), "while profiling runs")
    asyncio.run(jobs())
    st = warns(coprof.get_func_stats, "running", "up to now")
    assert st.get(name="job").ncall == 3, st.get(name="job")
    assert coprof.is_running()
    coprof.stop()
    assert not coprof.is_running()


@check("not preloaded, the shim loaded by the API installs no signal and starts no thread")
def _():
    coprof.start()
    try:
        with open("/proc/self/status") as f:
            caught = int([ln for ln in f if ln.startswith("SigCgt:")][0].split()[1], 16)
        assert not caught & (1 << (signal.SIGUSR2 - 1)), "SIGUSR2 is caught: %x" % caught
        tasks = len(os.listdir("/proc/self/task"))
        assert tasks == 1, "%d threads, the program has one" % tasks
    finally:
        coprof.stop()


@check("the clock is chosen once per process")
def _():
    assert coprof.get_clock_type() == "cpu"
    raises(coprof.CoprofError, lambda: coprof.set_clock_type("wall"), "cpu clock", "once")
    coprof.set_clock_type("CPU")


@check("func stats: yappi's fields, sort, get, filter, strip_dirs, print_all")
def _():
    st = coprof.get_func_stats()
    s = st.get(name="job")
    assert (s.module, s.lineno, s.ncall, s.nactualcall) == (__file__, job.__code__.co_firstlineno, 3, 3), s
    assert s.full_name == "%s:%d job" % (__file__, s.lineno)
    assert 0.015 <= s.ttot < 1 and s.tsub <= s.ttot and abs(s.tavg - s.ttot / 3) < 1e-9, s
    assert s.ctx_name.startswith("job-"), s.ctx_name
    raises(ValueError, lambda: st.sort("weight"), "weight", "ttot", "ncall")
    raises(ValueError, lambda: st.sort("ttot", "sideways"), "asc", "desc")
    names = [x.name for x in st.sort("name", "asc")]
    assert names == sorted(names)
    ttots = [x.ttot for x in st.sort("totaltime")]
    assert ttots == sorted(ttots, reverse=True)
    assert len(st) == len(list(st)) > 3
    mine = coprof.get_func_stats(filter={"module": __file__})
    assert {x.name for x in mine} >= {"job", "jobs", "burn"}, [x.name for x in mine]
    one = coprof.get_func_stats(filter_callback=lambda x: x.name == "burn")
    assert [x.name for x in one] == ["burn"]
    raises(ValueError, lambda: coprof.get_func_stats(filter={"colour": 1}), "colour", "name")
    assert any(c.name == "burn" for c in st.get(name="job").children)
    st.strip_dirs()
    assert st.get(name="job").module == os.path.basename(__file__)
    from io import StringIO
    out = StringIO()
    st.print_all(out=out, columns={0: ("name", 40), 1: ("ncall", 6), 2: ("ttot", 9)})
    text = out.getvalue()
    assert "Clock type: CPU" in text and "api_checks.py" in text and "tsub" not in text, text


@check("task and thread stats")
def _():
    tasks = {t.name: t for t in coprof.get_task_stats()}
    assert {"job-0", "job-1", "job-2"} <= set(tasks), tasks
    t = tasks["job-1"]
    assert t.state == "finished" and t.runtime == "asyncio" and t.ttot >= 0.004, t
    own = coprof.get_func_stats(ctx_id=t.id)
    assert own.get(name="job").ncall == 1 and own.get(name="job").ctx_name == "job-1"
    th = list(coprof.get_thread_stats())
    assert th and th[0].tid == os.getpid() and th[0].ttot > 0, th


@check("save: pstat, callgrind, pprof; an unknown type is a ValueError")
def _():
    st = coprof.get_func_stats()
    raises(ValueError, lambda: st.save(os.path.join(work, "x"), type="ystat"),
           "ystat", "pstat, callgrind, pprof")
    p = os.path.join(work, "saved.pstat")
    st.save(p)
    assert pstats.Stats(p).total_calls > 0
    ps = coprof.convert2pstats(st)
    assert [v[1] for k, v in ps.stats.items() if k[2] == "job"] == [3]
    with open(p, "rb") as f:
        marshal.load(f)
        extras = marshal.load(f)
    assert extras["clock"] == "cpu" and extras["tasks"], extras.keys()
    st.save(os.path.join(work, "saved.callgrind"), type="callgrind")
    with open(os.path.join(work, "saved.callgrind")) as f:
        assert "fn=" in f.read()
    st.save(os.path.join(work, "saved.pb.gz"), type="PPROF")
    with open(os.path.join(work, "saved.pb.gz"), "rb") as f:
        assert f.read(2) == b"\x1f\x8b"


@check("save and dump where they cannot write: OSError with the OS's reason, no file left")
def _():
    st = coprof.get_func_stats()
    e = raises(OSError, lambda: st.save("/nonexistent-dir/x.pstat"), "No such file")
    assert e.errno == 2
    e = raises(OSError, lambda: coprof.dump("/etc/hostname/x.pstat"), "Not a directory")
    full = os.path.join(work, "full")
    os.mkdir(full)
    old = resource.getrlimit(resource.RLIMIT_FSIZE)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, old[1]))
    try:
        raises(OSError, lambda: st.save(os.path.join(full, "big.pstat")), "File too large")
        raises(OSError, lambda: st.save(os.path.join(full, "big.cg"), type="callgrind"),
               "File too large")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old)
    assert os.listdir(full) == [], os.listdir(full)


@check("clear_stats, then start and stop again: the windows add up until cleared")
def _():
    coprof.clear_stats()
    assert len(coprof.get_func_stats()) == 0
    for _ in range(2):
        coprof.start()
        burn(0.002)
        coprof.stop()
    assert coprof.get_func_stats().get(name="burn").ncall == 2


@check("profile(): the block only, written to out; dump()")
def _():
    out = os.path.join(work, "block.pstat")
    with coprof.profile(clock="cpu", out=out) as p:
        asyncio.run(jobs())
    assert p.stats.get(name="job").ncall == 3
    assert p.stats.get(name="burn").ncall == 3
    s = pstats.Stats(out).stats
    assert [v[1] for k, v in s.items() if k[2] == "job"] == [3]
    coprof.dump(os.path.join(work, "dumped.pstat"))
    assert pstats.Stats(os.path.join(work, "dumped.pstat")).total_calls > 0


@check("os.fork while profiling: the child profiles on by itself, the parent keeps its own")
def _():
    coprof.clear_stats()
    coprof.start()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        burn(0.001)
        coprof.stop()
        os.write(w, b"%d" % coprof.get_func_stats().get(name="burn").ncall)
        os._exit(0)
    os.close(w)
    burn(0.001)
    burn(0.001)
    coprof.stop()
    os.waitpid(pid, 0)
    child = os.read(r, 16)
    assert child == b"1", child
    mine = coprof.get_func_stats().get(name="burn")
    assert mine.ncall == 2, mine


print("api_checks: %d failed" % len(failed))
sys.exit(1 if failed else 0)
