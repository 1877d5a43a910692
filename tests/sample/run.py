#!/usr/bin/env python3
"""run.py CASE: one integration test of sample mode (COPROF_MODE=sample) on a real process.

Runs a program under `coprof record --mode sample`, reads the profile back with pstats
and the coprof extras (the file's second marshal object) and asserts on the numbers.
Paths come from the environment meson sets (COPROF_*)."""
import concurrent.futures
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import (ASAN, base_env, catches, check, load, resp_windows, run_cases,  # noqa: E402
                         sched_measured, toggle_window, wait_for)

BIN = os.environ["COPROF_BIN"]
LIB = os.environ["COPROF_PRELOAD_LIB"]
CPU = os.environ["COPROF_CPU_SAMPLES"]
NATIVE = os.environ["COPROF_SAMPLES"]
WAITS = os.environ["COPROF_WAITS"]
TRAPS = os.environ["COPROF_TRAPS"]
ALTSTACK = os.environ["COPROF_ALTSTACK"]
SMALL_STACK = os.environ["COPROF_SMALL_STACK"]
TMP = tempfile.mkdtemp(prefix="coprof-sample-")
R = 5  # sched rounds


def python_env():
    """CPython leaks by design at exit: under ASan only our leaks would matter, and
    LeakSanitizer cannot tell them apart, so leak checks are off for Python runs."""
    env = base_env()
    if ASAN:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def record(opts, cmd, timeout=120, env=None, default_hz=False):
    """Records at 997 Hz (enough samples for the shares checked here) unless opts say
    otherwise, or at the default rate with default_hz."""
    if "--hz" not in opts and not default_hz:
        opts = ["--hz", "997"] + opts
    p = subprocess.run([BIN, "record", "--mode", "sample"] + opts + ["--"] + cmd,
                       env=env or base_env(), cwd=TMP, capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def entry(stats, name):
    found = [(k, v) for k, v in stats.items() if k[2] == name]
    check(len(found) == 1, f"{name}: {len(found)} entries among {sorted(k[2] for k in stats)[:40]}")
    return found[0]


def tt(stats, name):
    return entry(stats, name)[1][2]


def nc(stats, name):
    return entry(stats, name)[1][1]


def check_sampled(ex, hz):
    check(ex["mode"] == "sample", f"mode {ex['mode']}")
    check(ex["hz"] == hz, f"hz {ex['hz']}, expected {hz}")
    check(len(ex["stacks"]) > 0, "no stack table")


def check_split(stats, what, tol=5.0):
    """heavy() has 2/3 of heavy+light's own time, within tol points."""
    h, l = tt(stats, "heavy"), tt(stats, "light")
    share = 100.0 * h / (h + l)
    check(abs(share - 200.0 / 3) <= tol, f"{what}: heavy has {share:.1f}% of the CPU, expected 66.7 ±{tol}")
    return share


def callers(stats, name):
    return {k[2]: v for k, v in entry(stats, name)[1][4].items()}


def split_case(exe, opts=(), seconds="1.5"):
    out = os.path.join(TMP, "split.pstat")
    record(["-o", out] + list(opts), [os.path.join(CPU, exe), seconds])
    stats, ex = load(out)
    return stats, ex


def case_split_cpu():
    stats, ex = split_case("cpu-split")
    check_sampled(ex, 997)
    check(ex["clock"] == "cpu", f"clock {ex['clock']}")
    check_split(stats, "cpu-split")
    # caller edges come from adjacent frames
    check(set(callers(stats, "heavy")) == {"run"}, f"heavy called from {callers(stats, 'heavy')}")
    check(nc(stats, "run") >= nc(stats, "heavy") + nc(stats, "light"), "run appears under both")
    # the raw stacks: heavy <- run <- main, counted as often as heavy was sampled
    funcs = [k for k in stats]
    n = 0
    for task, tid, frames, count, waiting in ex["stacks"]:
        names = [f[2] for f in frames]
        if names[:3] == ["heavy", "run", "main"]:
            n += count
        check(task == -1 and tid == ex["pid"] and not waiting, f"stack row {task} {tid} {waiting}")
    check(n == nc(stats, "heavy"), f"stacks through heavy: {n}, heavy nc {nc(stats, 'heavy')}")
    # the thread's ttot is the CPU time sampled on it (rule 10 in sample form)
    total = sum(v[2] for v in stats.values())
    thread = [t for t in ex["threads"] if t["tid"] == ex["pid"]][0]
    check(abs(thread["ttot"] - total) <= 0.02 * total, f"thread ttot {thread['ttot']} vs sum of tt {total}")
    check(len(ex["threads"]) == 1, f"threads {ex['threads']}: the sampler's own thread must not show")


def case_split_nofp():
    stats, ex = split_case("cpu-split-nofp")
    check_sampled(ex, 997)
    check_split(stats, "cpu-split-nofp")
    # without frame pointers libunwind walks .eh_frame: the callers are still right
    for f in ("heavy", "light"):
        c = callers(stats, f)
        check(set(c) == {"run"}, f"{f} called from {set(c)}")
        check(c["run"][0] == nc(stats, f), f"{f}: every stack goes through run")
    check("main" in callers(stats, "run"), f"run called from {callers(stats, 'run')}")


def case_split_stripped():
    exe = os.path.join(CPU, "cpu-split-stripped")
    stats, ex = split_case("cpu-split-stripped")
    check_sampled(ex, 997)
    key, _ = entry(stats, "heavy")
    check(key[1] == 0 and os.path.realpath(key[0]) == os.path.realpath(exe),
          f"stripped heavy keyed {key}, expected ({exe}, 0, 'heavy')")
    check_split(stats, "cpu-split-stripped")


def case_split_10k():
    out = os.path.join(TMP, "split10k.pstat")
    record(["-o", out, "--hz", "10000"], [os.path.join(CPU, "cpu-split"), "1.5"])
    stats, ex = load(out)
    check_sampled(ex, 10000)
    check_split(stats, "10 kHz")
    cpu = tt(stats, "heavy") + tt(stats, "light")
    n = nc(stats, "heavy") + nc(stats, "light")
    check(n >= 0.5 * 10000 * cpu, f"{n} samples over {cpu:.3f} s of CPU at 10 kHz")


def case_split_199():
    # under cpu, a rate the kernel's tick serves takes the CPU-time timer alone
    out = os.path.join(TMP, "split199.pstat")
    record(["-o", out, "--hz", "199"], [os.path.join(CPU, "cpu-split"), "2.5", "2"])
    stats, ex = load(out)
    check_sampled(ex, 199)
    check_split(stats, "199 Hz, 2 threads")
    cpu = tt(stats, "heavy") + tt(stats, "light")
    n = nc(stats, "heavy") + nc(stats, "light")
    check(0.5 * 199 * cpu <= n <= 1.5 * 199 * cpu, f"{n} samples over {cpu:.3f} s of CPU at 199 Hz")
    check(len(ex["threads"]) == 2, f"threads {ex['threads']}")


def case_wall_split():
    t0 = time.time()
    stats, ex = split_case("cpu-split", ["-c", "wall"])
    elapsed = time.time() - t0
    check_sampled(ex, 997)
    check(ex["clock"] == "wall", "clock")
    total = sum(v[2] for v in stats.values())
    check(total <= elapsed * 1.05, f"{total:.3f} s sampled in {elapsed:.3f} s of wall time")
    check_split(stats, "wall", tol=8.0)


def case_threads():
    out = os.path.join(TMP, "threads.pstat")
    record(["-o", out], [os.path.join(CPU, "cpu-split"), "1", "3"])
    nodes = {}
    stats, ex = load(out, nodes)
    check_sampled(ex, 997)
    # The whole-program tree: each thread's node calls its own stack's roots, shared
    # out by the thread's samples (sample mode has no traced roots).
    for t in ex["threads"]:
        node = [v for n, v in nodes.items() if n.startswith("<thread ") and
                n.endswith(" %d>" % t["tid"])]
        check(len(node) == 1 and sum(e[3] for e in node[0].values()) >= 0.5 * t["ttot"] > 0,
              "thread %d's node in the whole-program tree: %s (thread ttot %.3f)"
              % (t["tid"], node, t["ttot"]))
    per = {}
    for task, tid, frames, count, waiting in ex["stacks"]:
        leaf = frames[0][2]
        if leaf in ("heavy", "light"):
            per.setdefault(tid, {"heavy": 0, "light": 0})[leaf] += count
    check(len(per) == 3, f"{len(per)} threads sampled, expected 3: {per}")
    for tid, c in per.items():
        share = 100.0 * c["heavy"] / (c["heavy"] + c["light"])
        check(abs(share - 200.0 / 3) <= 10, f"thread {tid}: heavy {share:.1f}% of its samples")
    tids = {t["tid"] for t in ex["threads"]}
    check(set(per) <= tids and len(tids) == 3, f"thread table {tids} vs sampled {set(per)}")
    check_split(stats, "3 threads")


def sched(opts):
    """The sched sample's profile (stats, extras) and what it measured it took."""
    out = os.path.join(TMP, "sched.pstat")
    p = record(["-o", out] + opts, [os.path.join(NATIVE, "sched"), str(R), "40", "20"])
    return load(out) + (sched_measured(p.stdout),)


def task_leaves(ex, stats_funcs=None):
    """{task name: {(leaf, waiting): samples}} from the stack table."""
    out = {}
    for task, tid, frames, count, waiting in ex["stacks"]:
        name = ex["tasks"][task]["name"] if task >= 0 else "<thread>"
        d = out.setdefault(name, {})
        names = tuple(f[2] for f in frames)
        d[names, bool(waiting)] = d.get((names, bool(waiting)), 0) + count
    return out


def case_sched_cpu():
    stats, ex, took = sched(["-c", "cpu"])
    check_sampled(ex, 997)
    tasks = ex["tasks"]
    check(sorted(t["name"] for t in tasks) == ["crunch", "crunch", "sleeper"], f"tasks {tasks}")
    check(not any(w for *_, w in ex["stacks"]), "no waiting stacks under cpu")
    cpu = {}
    for t in tasks:
        names = {k[2]: v for k, v in t["stats"].items()}
        if t["name"] == "crunch":
            check("crunch_work" in names and "sleeper_work" not in names, f"crunch task has {sorted(names)}")
            cpu.setdefault("crunch", []).append(names["crunch_work"][3])
        else:
            check("sleeper_work" in names and "crunch_work" not in names, f"sleeper task has {sorted(names)}")
            cpu["sleeper"] = [names["sleeper_work"][3]]
    # crunch burns 40 ms a round, sleeper 4 ms: each crunch task ~10x the sleeper, held
    # to what each took by the thread's clock (a crunch task's CPU is its work's but for
    # its naps' few microseconds)
    for c, want in zip(sorted(cpu["crunch"]), took["crunch"]):
        check(abs(c - want) <= 0.2 * want, f"crunch_work ct {c:.3f} s, the task took {want:.3f}")
    s, want = cpu["sleeper"][0], took["sleeper_work"]
    check(abs(s - want) <= 0.5 * want, f"sleeper_work ct {s:.4f} s, it took {want:.4f}")


def case_sched_wall():
    stats, ex, _ = sched(["-c", "wall"])
    check_sampled(ex, 997)
    leaves = task_leaves(ex)
    for name in ("crunch", "sleeper"):
        waits = {k: v for k, v in leaves.get(name, {}).items() if k[1]}
        check(waits, f"{name}: no wait stack")
        for (frames, _), n in waits.items():
            check(frames[0] == "task_yield" and frames[1] == "nap",
                  f"{name} waits at {frames[:4]}, expected task_yield <- nap")
    # the sleeper naps 60 ms a round (three naps of the 20 ms): at least that is waited
    sleeper_wait = sum(n for (f, w), n in leaves["sleeper"].items() if w)
    check(sleeper_wait >= 0.8 * R * 0.060 * 997, f"sleeper waited {sleeper_wait} ticks")
    # waits land in task_yield's tt (rule 5), running time in the work functions
    check(tt(stats, "task_yield") >= 0.8 * R * 0.060, f"task_yield tt {tt(stats, 'task_yield'):.3f} s")
    for t in ex["tasks"]:
        check(t["ttot"] > 0, f"task {t['name']} has no sampled time")
    # the scheduler's own samples (after a task finished, too) are not a task's
    for task, tid, frames, count, waiting in ex["stacks"]:
        names = [f[2] for f in frames]
        check(task == -1 or "run_scheduler" not in names, f"task {task} charged the scheduler: {names}")
        check(task >= 0 or not waiting, "a thread's own context never waits")


def case_toggle():
    n = 4
    tmpl = os.path.join(TMP, "t.%n.pstat")
    cmd = [BIN, "record", "--mode", "sample", "--hz", "997", "--no-start", "-o", tmpl, "--",
           os.path.join(CPU, "cpu-split"), "60"]
    p = subprocess.Popen(cmd, env=base_env(), cwd=TMP, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: catches(p.pid, signal.SIGUSR2), 20, "the toggle handler")
        time.sleep(0.3)
        for i in range(1, n + 1):
            toggle_window(p.pid, tmpl, i, 0.6)
            time.sleep(0.3)
        check(p.poll() is None, "the program died")
    finally:
        p.kill()
        p.wait()
    files = sorted(glob.glob(os.path.join(TMP, "t.*.pstat")))
    check(len(files) == n, f"{n} windows gave {files}")
    for f in files:
        stats, ex = load(f)
        check_sampled(ex, 997)
        check_split(stats, f, tol=10.0)
        cpu = tt(stats, "heavy") + tt(stats, "light")
        window = ex["stop"] - ex["start"]
        check(cpu <= window * 1.1, f"{f}: {cpu:.3f} s sampled in a {window:.3f} s window")


def case_resp():
    toggles = 10
    tmpl = os.path.join(TMP, "resp.%n.pstat")
    cmd = [BIN, "record", "--mode", "sample", "--hz", "997", "--no-start", "-c", "wall", "-o", tmpl,
           "--", os.path.join(NATIVE, "resp"), "0"]
    resp_windows(cmd, TMP, tmpl, toggles, requests=2000, clients=8)
    files = glob.glob(os.path.join(TMP, "resp.*.pstat"))
    check(len(files) == toggles, f"{toggles} windows gave {len(files)} files")
    waited = 0
    for i in range(1, toggles + 1):
        stats, ex = load(tmpl.replace("%n", str(i)))
        check_sampled(ex, 997)
        check(any(t["name"] == "serve" for t in ex["tasks"]), f"window {i}: no serve task")
        for task, tid, frames, count, waiting in ex["stacks"]:
            if waiting:
                check(task >= 0 and ex["tasks"][task]["name"] == "serve", f"window {i}: wait row {task}")
                check("wait_for" in [f[2] for f in frames[:3]], f"window {i}: serve waits at {frames[:3]}")
                waited += count
    check(waited > 0, "no connection was ever seen waiting")


def case_python():
    """Issue 12: in CPython the samples hold the Python frames, keyed as trace mode keys
    them, and nothing is said on stderr."""
    out = os.path.join(TMP, "py.pstat")
    code = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: sum(range(1000))\n"
    p = record(["-o", out], ["/usr/bin/python3", "-c", code], env=python_env())
    lines = [l for l in p.stderr.splitlines() if l.startswith("coprof:")]
    check(not lines, f"nothing on stderr expected: {lines}")
    stats, ex = load(out)
    check_sampled(ex, 997)
    check(not any("Python" in n for n in ex["notes"]), f"notes {ex['notes']}")
    total = sum(v[2] for v in stats.values())
    check(0.2 <= total <= 0.6, f"{total:.3f} s of samples for 0.3 s of CPU")
    mod = stats.get(("<string>", 1, "<module>"))
    check(mod is not None, f"no <module> frame: {sorted(stats)[:10]}")
    check(mod[3] >= 0.8 * total - 0.05, f"<module> has {mod[3]:.3f} s of {total:.3f}")


def case_fork():
    out = os.path.join(TMP, "fork.%p.pstat")
    code = ("import os, time\n"
            "def spin():\n"
            "    t = time.process_time()\n"
            "    while time.process_time() - t < 0.3: sum(range(1000))\n"
            "pid = os.fork()\n"
            "spin()\n"
            "if pid: os.waitpid(pid, 0)\n")
    record(["-o", out], ["/usr/bin/python3", "-c", code], env=python_env())
    files = glob.glob(os.path.join(TMP, "fork.*.pstat"))
    check(len(files) == 2, f"parent and child files expected: {files}")
    for f in files:
        stats, ex = load(f)
        total = sum(v[2] for v in stats.values())
        check(total >= 0.15, f"{f} (pid {ex['pid']}): {total:.3f} s sampled, the timers did not follow")


def waits_case(clock):
    """Issue 21.4: sampling never shortens a wait. Each way of blocking waits ten times
    100 ms, one call each, as a host that does not retry on EINTR; none comes back
    early, in both clocks, at the default rate and at 10 kHz. The ten programs (and
    Python's time.sleep at each rate) run at once: each waits a second and uses a few
    percent of a CPU at 10 kHz, and a wait cut short comes back early whatever runs
    beside it, so one after the other they only took ten times as long."""

    def native(hz, how):
        out = os.path.join(TMP, f"waits-{how}-{hz or 'default'}.pstat")
        opts = ["-c", clock] + (["--hz", str(hz)] if hz else [])
        p = record(["-o", out] + opts, [WAITS, how], default_hz=True)
        secs, early = p.stdout.split()
        check(int(early) == 0 and float(secs) >= (0.99 if how != "pipe" else 0.95),
              f"{clock} {hz or 'default'} Hz, {how}: {early} of 10 waits came back early, {secs} s")
        check("coprof:" not in p.stderr, f"stderr: {p.stderr!r}")
        # under cpu a program that only sleeps may take no sample, and write no file
        check(clock == "cpu" or os.path.exists(out), f"{clock} {how}: no profile")
        if os.path.exists(out):
            stats, ex = load(out)
            check(ex["hz"] == (hz or 99), f"hz {ex['hz']}, expected {hz or 99} (the default)")
            if clock == "wall" and how == "epoll":
                # the waits are charged where they happened: ~1 s in epoll_wait
                waited = sum(v[2] for k, v in stats.items() if "epoll_wait" in k[2])
                check(0.8 <= waited <= 1.2, f"epoll_wait charged {waited:.3f} s of 1 s asleep in it")
            os.unlink(out)

    def python(hz):
        out = os.path.join(TMP, f"waits-py-{hz or 'default'}.pstat")
        opts = ["-c", clock] + (["--hz", str(hz)] if hz else [])
        code = ("import time\nt = time.monotonic()\nfor _ in range(10): time.sleep(0.1)\n"
                "print(round(time.monotonic() - t, 3))\n")
        p = record(["-o", out] + opts, ["/usr/bin/python3", "-c", code], env=python_env(),
                   default_hz=True)
        check(float(p.stdout) >= 0.99, f"{clock}: Python's time.sleep took {p.stdout.strip()} s for 1 s")

    jobs = []
    for hz in (None, 10000):
        jobs += [(native, hz, how) for how in ("usleep", "pipe", "epoll", "cond")]
        jobs.append((python, hz))
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        done = [pool.submit(*job) for job in jobs]
        for f in done:
            f.result()  # the first failure, in the order above, is the test's


def case_waits_cpu():
    waits_case("cpu")


def case_waits_wall():
    waits_case("wall")


def case_epoll_split():
    """Known answer: 1 ms of CPU in burn(), then 1 ms asleep in epoll_wait. Under cpu at
    997 Hz the samples land where the CPU was spent: burn (with what it calls) has at
    least 90% of them and epoll_wait at most 5%."""
    out = os.path.join(TMP, "epoll-split.pstat")
    record(["-o", out, "-c", "cpu", "--hz", "997"], [WAITS, "split", "2"])
    stats, ex = load(out)
    check_sampled(ex, 997)
    total = sum(v[2] for v in stats.values())
    burn = entry(stats, "burn")[1][3]
    epoll = sum(v[2] for k, v in stats.items() if "epoll_wait" in k[2])
    check(total > 0.1, f"{total:.3f} s sampled")
    check(burn >= 0.90 * total, f"burn has {100 * burn / total:.1f}% of {total:.3f} s, expected >= 90%")
    check(epoll <= 0.05 * total, f"epoll_wait has {100 * epoll / total:.1f}% of {total:.3f} s, expected <= 5%")


def case_no_perf():
    """Where perf events are refused (here: strace makes perf_event_open fail with
    EACCES, as paranoid 3 would), cpu falls back to the CPU-time timer at the kernel's
    tick rate at most, and says so once on stderr and in the notes; wall samples
    nothing and says so."""
    strace = shutil.which("strace")
    check(strace is not None, "strace is needed (scripts/setup.sh installs it)")
    out = os.path.join(TMP, "noperf.pstat")
    env = base_env()
    env.pop("LD_PRELOAD", None)  # the shim goes to the traced program only (-E)
    env.update({"COPROF_MODE": "sample", "COPROF_OUT": out, "COPROF_HZ": "997"})
    preload = ASAN + ":" + LIB if ASAN else LIB
    if ASAN:
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # LeakSanitizer does not work under ptrace
    p = subprocess.run([strace, "-f", "-qq", "-o", "/dev/null", "-E", f"LD_PRELOAD={preload}",
                        "-e", "trace=perf_event_open", "-e", "inject=perf_event_open:error=EACCES",
                        os.path.join(CPU, "cpu-split"), "1.5"],
                       env=env, cwd=TMP, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    lines = [l for l in p.stderr.splitlines() if l.startswith("coprof:")]
    check(len(lines) == 1 and "no perf events (Permission denied)" in lines[0], f"stderr: {lines}")
    stats, ex = load(out)
    check(any("CPU-time timer" in n for n in ex["notes"]), f"notes {ex['notes']}")
    check_split(stats, "CPU-time timer", tol=8.0)
    # wall has no harmless fallback (a timer would cut sleeps short): it samples nothing,
    # says why, and the program's waits keep their length
    out = os.path.join(TMP, "noperf-wall.pstat")
    env.update({"COPROF_CLOCK": "wall", "COPROF_OUT": out})
    p = subprocess.run([strace, "-f", "-qq", "-o", "/dev/null", "-E", f"LD_PRELOAD={preload}",
                        "-e", "trace=perf_event_open", "-e", "inject=perf_event_open:error=EACCES",
                        WAITS, "usleep"], env=env, cwd=TMP, capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    secs, early = p.stdout.split()
    check(int(early) == 0 and float(secs) >= 0.99, f"wall without perf: {early} waits cut short")
    lines = [l for l in p.stderr.splitlines() if l.startswith("coprof:")]
    check(len(lines) == 1 and "-c wall needs perf events" in lines[0], f"stderr: {lines}")
    check(not os.path.exists(out), "a profile was written with nothing sampled")


def unwinder(line):
    """The object throws.c's first line names, by its real path (the ASan runtime is
    preloaded from gcc's directory, linked from the library directory)."""
    check(line.startswith("unwinder "), f"throws printed {line!r}")
    name = line[len("unwinder "):]
    return os.path.realpath(name) if name.startswith("/") else name


def case_cxx_throws():
    """A C program that loads C++ code at run time throws through the same unwinder with
    the shim preloaded as without it (the shim's libunwind stays out of the global scope),
    and sampling it at 2 kHz while it throws never hangs. throws-unw links libunwind
    itself, so its exceptions and the sampler share one libunwind: the lock it takes with
    every signal blocked must stay blocked to the tick (before: a tick in it waited
    forever for that lock); under ASan, whose sigprocmask hides libunwind's from the
    guard, a tick that lands in libunwind is not walked."""
    lib = os.environ.get("COPROF_THROWER")
    check(lib is not None, "no C++ compiler: throws was not built")
    for exe, n in ((os.environ["COPROF_THROWS"], 600000),
                   (os.environ["COPROF_THROWS_UNW"], 100000)):
        name = os.path.basename(exe)
        plain = subprocess.run([exe, lib, "10"], capture_output=True, text=True, timeout=60)
        check(plain.returncode == 0, f"{name} unprofiled: {plain.returncode} {plain.stderr}")
        for mode in ("trace", "sample"):
            out = os.path.join(TMP, f"{name}-{mode}.pstat")
            env = base_env(COPROF_MODE=mode, COPROF_HZ="2000", COPROF_OUT=out)
            env["LD_PRELOAD"] = ASAN + ":" + LIB if ASAN else LIB
            if ASAN:
                env["ASAN_OPTIONS"] = "detect_leaks=0"
            p = subprocess.Popen([exe, lib, str(n)], env=env, cwd=TMP, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            try:
                stdout, stderr = p.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                p.kill()  # the child we started, by pid
                p.communicate()
                raise AssertionError(f"{name} under {mode} mode hung (90 s for {n} throws)")
            check(p.returncode == 0, f"{name} under {mode}: exit {p.returncode}: {stderr}")
            lines = stdout.splitlines()
            check(unwinder(lines[0]) == unwinder(plain.stdout.splitlines()[0]),
                  f"{name} under {mode}: {lines[0]!r}, unprofiled {plain.stdout.splitlines()[0]!r}")
            check(lines[1] == f"caught {n} of {n}", f"{name} under {mode}: {lines[1]!r}")
            if mode != "sample":
                continue
            stats, ex = load(out)
            total = sum(v[2] for v in stats.values())
            alone = ex["dropped"].get("sample stacks not unwound", 0) / ex["hz"]
            loop = [v for k, v in stats.items() if k[2] == "throw_loop"]
            check(total > 0.2 and loop, f"{name}: {total:.3f} s sampled, throw_loop: {loop}")
            if ASAN:
                # ASan's sigprocmask stands between libunwind and the signal guard: ticks
                # that land in libunwind keep their pc alone (counted), and its
                # interceptors' frames cut other walks short
                continue
            check(alone < 0.01 * total, f"{name}: {alone:.3f} s of {total:.3f} s not unwound")
            check(loop[0][3] >= 0.8 * total,
                  f"{name}: throw_loop has {loop[0][3]:.3f} s of {total:.3f} s sampled")


HOSTILE = os.environ.get("COPROF_HOSTILE", "")


def fd_limit():
    """The program's descriptor limit: 4096, so the sampler keeps its events from 1024 up
    (half the limit below 2048) and the program's 1,100 files cover them."""
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    soft = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def hostile(mode, clock, out):
    """Runs hostile.c's `mode` under sample mode and `clock`: (exit code, stdout, the
    coprof: lines of stderr)."""
    p = subprocess.run([BIN, "record", "--mode", "sample", "-c", clock, "--hz", "997", "-o", out,
                        "--", HOSTILE, mode], env=base_env(), cwd=TMP, capture_output=True,
                       text=True, timeout=120, preexec_fn=fd_limit)
    return p.returncode, p.stdout, [l for l in p.stderr.splitlines() if l.startswith("coprof:")]


def case_closeall_fds():
    """Issue 39.5: after the program's close-all loop, its own files take the numbers of
    the sampler's perf events. A thread's exit and a fork child must close none of them,
    nor take one for a pipe: every one of the 1,100 is still its /dev/null."""
    for clock in ("cpu", "wall"):
        for mode, who in (("closeall-thread", "main"), ("closeall-fork", "child")):
            rc, out, _ = hostile(mode, clock, os.path.join(TMP, f"{mode}-{clock}.%p.pstat"))
            check(rc == 0 and out == f"{who}: 1100 fds still the program's\n",
                  f"{mode} -c {clock}: exit {rc}, printed {out!r}")


def case_closeall_rearm():
    """Issue 39.6: a daemon-style close-all closes the thread's perf events; the sampler
    opens them again, so the function that runs after it is sampled, and the notes and
    the dropped counts say what happened (one event under cpu, two under wall)."""
    for clock, events in (("cpu", 1), ("wall", 2)):
        out = os.path.join(TMP, f"daemon-{clock}.pstat")
        rc, printed, _ = hostile("daemon", clock, out)
        check(rc == 0 and printed == "done\n", f"-c {clock}: exit {rc}, printed {printed!r}")
        stats, ex = load(out)
        for f in ("before_close", "after_close"):
            check(nc(stats, f) > 0, f"-c {clock}: {f} has no sample")
        note = ("sample mode: the program closed coprof's perf event descriptors (a close-all "
                "loop); they were opened again within 50 ms, the ticks in between are lost")
        check(ex["notes"].count(note) == 1, f"-c {clock}: notes {ex['notes']}")
        lost = ex["dropped"].get("sample perf events closed by the program")
        check(lost == events, f"-c {clock}: {lost} events closed, expected {events}")


def case_seccomp():
    """Issue 39.7: a program whose seccomp filter kills on ioctl, or on perf_event_open,
    runs as it does unprofiled; the sampler says once, on stderr and in the notes, that
    it stepped back. A filter installed with no libc call (seccomp-raw) is found as the
    next thread starts. Under ioctl the main thread is still sampled after the filter."""
    for clock in ("cpu", "wall"):
        for mode, how in (("seccomp-ioctl", "the program installed a seccomp filter"),
                          ("seccomp-perf", "the program installed a seccomp filter"),
                          ("seccomp-raw", "a thread started under a seccomp filter")):
            out = os.path.join(TMP, f"{mode}-{clock}.pstat")
            rc, printed, said = hostile(mode, clock, out)
            what = f"{mode} -c {clock}"
            check(rc == 0 and printed == "sandboxing\ndone\n", f"{what}: exit {rc}, printed {printed!r}")
            note = (f"sample mode: {how}; threads started from then on are not sampled, and "
                    "ticks are not dithered: each weighs one period")
            check(said == ["coprof: " + note], f"{what}: stderr {said}")
            stats, ex = load(out)
            check(ex["notes"].count(note) == 1, f"{what}: notes {ex['notes']}")
            if mode == "seccomp-ioctl":
                check(nc(stats, "sandboxed") > 0, f"{what}: sandboxed() has no sample")


def same_as_unprofiled(name, cmd, want, lines=None):
    """cmd ends as `want` says, (return code, stdout), unprofiled and under sample mode
    with either clock (a process killed by a signal: its negative number; coprof record
    ends on the child's signal); `lines`: only so many first lines of stdout are
    compared. Returns the profiled runs' stderr."""
    def first(out):
        return out if lines is None else "".join(out.splitlines(True)[:lines])
    plain = subprocess.run(cmd, env=base_env(), capture_output=True, text=True, timeout=60)
    check((plain.returncode, first(plain.stdout)) == want,
          f"{name} unprofiled: exit {plain.returncode}, stdout {plain.stdout!r}, expected {want}")
    errs = []
    for clock in ("cpu", "wall"):
        out = os.path.join(TMP, f"{name}-{clock}.pstat")
        p = subprocess.run([BIN, "record", "--mode", "sample", "-c", clock, "--hz", "997",
                            "-o", out, "--"] + cmd, env=base_env(), cwd=TMP,
                           capture_output=True, text=True, timeout=60)
        check((p.returncode, first(p.stdout)) == want,
              f"{name} under -c {clock}: exit {p.returncode}, stdout {p.stdout!r}, "
              f"expected {want}\n{p.stderr}")
        errs.append(p.stderr)
    return errs


def case_sigtrap():
    """A SIGTRAP that is not a tick (perf ticks are SIGTRAPs) gets what it gets
    unprofiled: the default action kills the process on SIGTRAP, from int3 or raise
    (before: the trap was swallowed and the program ran on); SIG_IGN drops a raised trap
    but not an int3, which the kernel makes fatal; a handler the program installs gets
    it once (sampling stops, and says so); blocked, a raised trap waits for the unblock
    (the guard never blocks the tick signal for real) and an int3 does not."""
    killed = (-signal.SIGTRAP, "")
    handled = (0, "handled 1\nsurvived\n")
    want = {("int3", "dfl"): killed, ("raise", "dfl"): killed,
            ("int3", "ign"): killed, ("raise", "ign"): (0, "survived\n"),
            ("int3", "handler"): handled, ("raise", "handler"): handled,
            ("int3", "blocked"): killed, ("raise", "blocked"): (-signal.SIGTRAP, "unblocking\n")}
    for (how, disp), w in want.items():
        errs = same_as_unprofiled(f"trap-{how}-{disp}", [TRAPS, how, disp], w)
        for err in errs:
            lines = [l for l in err.splitlines() if l.startswith("coprof:")]
            said = ["coprof: sample mode: the program installed its own handler for the "
                    "tick signal; sampling stopped"] if disp == "handler" else []
            check(lines == said, f"{how} {disp}: stderr {lines}")


def case_altstack():
    """Ticks that land while a handler of the program's runs on its 8 KiB alternate
    stack write nothing below it (before: some 2 KiB of the heap under it), in the main
    thread and in another; sigaltstack shows the program its own alternate stack alone
    (none before it sets one, none after it disables it: the tick stack is not its)."""
    before = "set" if ASAN else "none"  # AddressSanitizer gives each thread its own
    # under AddressSanitizer the handler's own calls take more of it: at 8 KiB a tick's
    # kernel frame no longer fits below them, as for any handler (an empty one)
    size = "12288" if ASAN else "8192"
    want = "".join(f"{t}: before: {before}\n"
                   f"{t}: 0 bytes below the alternate stack overwritten\n{t}: view ok\n"
                   for t in ("main", "thread"))
    same_as_unprofiled("altstack", [ALTSTACK, size], (0, want))


def case_small_stack():
    """A coroutine that leaves 4 KiB of its 32 KiB stack runs through 0.3 s of ticks in
    the main thread, in a second thread and in a fork child, as it does unprofiled and
    with an empty handler ticking (before: SIGSEGV with less than about 9 KiB left, the
    tick handler took 10 KiB of the interrupted stack); the tick stacks of threads that
    ended leave no mapping behind."""
    # under AddressSanitizer the program's own calls take more of the stack (its
    # interceptors, redzones): 26 KiB is the most it runs with unprofiled
    use = "24" if ASAN else "28"
    if ASAN:
        # its allocator maps more as the sampler's per-thread state goes to quarantine:
        # the mappings are not counted
        same_as_unprofiled("small-stack", [SMALL_STACK, use],
                           (0, "ok main\nok thread\nok child\n"), lines=3)
        return
    same_as_unprofiled("small-stack", [SMALL_STACK, use],
                       (0, "ok main\nok thread\nok child\nmaps kept\n"))


if __name__ == "__main__":
    run_cases(globals())
