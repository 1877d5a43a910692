#!/usr/bin/env python3
"""run.py CASE: one integration test of sample mode (COPROF_MODE=sample) on a real process.

Runs a program under `coprof record --mode sample`, reads the profile back
(coprof_test.Profile: pstats and the coprof extras, the file's second marshal object)
and asserts what is exact: which functions were sampled, their callers and stacks,
which task or thread a stack is charged to, the notes and lines said, files, exit
codes; and what holds whatever the load (a wait sampled under wall is at least the
time waited, CPU sampled in a window no more than the window). Sampled shares and
times against what the program did are bench/sample/accuracy.py's, on these same
workloads at their full size. Paths come from the environment meson sets (COPROF_*)."""
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
from coprof_test import (ASAN, Profile, base_env, catches, check, funcs, resp_windows,  # noqa: E402
                         run_cases, sched_measured, toggle_window, wait_for)

BIN = os.environ["COPROF_BIN"]
LIB = os.environ["COPROF_PRELOAD_LIB"]
CPU = os.environ["COPROF_CPU_SAMPLES"]
NATIVE = os.environ["COPROF_SAMPLES"]
WAITS = os.environ["COPROF_WAITS"]
TRAPS = os.environ["COPROF_TRAPS"]
ALTSTACK = os.environ["COPROF_ALTSTACK"]
SMALL_STACK = os.environ["COPROF_SMALL_STACK"]
TMP = tempfile.mkdtemp(prefix="coprof-sample-")
# The tests' sizes; bench/sample/accuracy.py runs the same workloads at the sizes the
# shares need: cpu-split 1.5 s, sched 5 rounds of 40 ms, python 0.3 s...
SPLIT_S = 0.3  # cpu-split's seconds of CPU
R, CRUNCH, NAP = 5, 30, 15  # sched: rounds, ms; the sleeper burns CRUNCH / 10 a round
SPIN_S = 0.1  # Python's busy loops


def python_env():
    """CPython leaks by design at exit: under ASan only our leaks would matter, and
    LeakSanitizer cannot tell them apart, so leak checks are off for Python runs."""
    env = base_env()
    if ASAN:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def record(opts, cmd, timeout=120, env=None, default_hz=False):
    """Records at 997 Hz unless opts say otherwise, or at the default rate with
    default_hz."""
    if "--hz" not in opts and not default_hz:
        opts = ["--hz", "997"] + opts
    p = subprocess.run([BIN, "record", "--mode", "sample"] + opts + ["--"] + cmd,
                       env=env or base_env(), cwd=TMP, capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def check_sampled(ex, hz):
    check(ex["mode"] == "sample", f"mode {ex['mode']}")
    check(ex["hz"] == hz, f"hz {ex['hz']}, expected {hz}")
    check(len(ex["stacks"]) > 0, "no stack table")


def check_both(prof, what):
    """heavy() and light() were both sampled (their 2:1 share is the bench's)."""
    check(prof.nc("heavy") > 0 and prof.nc("light") > 0,
          f"{what}: heavy {prof.nc('heavy')} samples, light {prof.nc('light')}")


def callers(prof, name):
    return {k[2]: v for k, v in prof.one(name)[4].items()}


def split(exe="cpu-split", opts=(), seconds=SPLIT_S, threads=None, name="split"):
    """samples/cpu's EXE SECONDS [THREADS] sampled (997 Hz unless opts say): (Profile,
    the wall seconds record took)."""
    out = os.path.join(TMP, name + ".pstat")
    t0 = time.time()
    record(["-o", out] + list(opts), [os.path.join(CPU, exe), str(seconds)] + ([str(threads)] if threads else []))
    return Profile(out), time.time() - t0


def case_split_cpu():
    prof, _ = split()
    ex = prof.extras
    check_sampled(ex, 997)
    check(ex["clock"] == "cpu", f"clock {ex['clock']}")
    check_both(prof, "cpu-split")
    # caller edges come from adjacent frames
    check(set(callers(prof, "heavy")) == {"run"}, f"heavy called from {callers(prof, 'heavy')}")
    check(prof.nc("run") >= prof.nc("heavy") + prof.nc("light"), "run appears under both")
    # the raw stacks: heavy <- run <- main, counted as often as heavy was sampled
    n = 0
    for task, tid, frames, count, waiting in ex["stacks"]:
        names = [f[2] for f in frames]
        if names[:3] == ["heavy", "run", "main"]:
            n += count
        check(task == -1 and tid == ex["pid"] and not waiting, f"stack row {task} {tid} {waiting}")
    check(n == prof.nc("heavy"), f"stacks through heavy: {n}, heavy nc {prof.nc('heavy')}")
    # the thread's ttot is the CPU time sampled on it (rule 10 in sample form)
    total = sum(v[2] for v in prof.stats.values())
    thread = [t for t in ex["threads"] if t["tid"] == ex["pid"]][0]
    check(abs(thread["ttot"] - total) <= 0.02 * total, f"thread ttot {thread['ttot']} vs sum of tt {total}")
    check(len(ex["threads"]) == 1, f"threads {ex['threads']}: the sampler's own thread must not show")


def case_split_nofp():
    prof, _ = split("cpu-split-nofp")
    check_sampled(prof.extras, 997)
    check_both(prof, "cpu-split-nofp")
    # without frame pointers libunwind walks .eh_frame: the callers are still right
    for f in ("heavy", "light"):
        c = callers(prof, f)
        check(set(c) == {"run"}, f"{f} called from {set(c)}")
        check(c["run"][0] == prof.nc(f), f"{f}: every stack goes through run")
    check("main" in callers(prof, "run"), f"run called from {callers(prof, 'run')}")


def case_split_stripped():
    exe = os.path.join(CPU, "cpu-split-stripped")
    prof, _ = split("cpu-split-stripped")
    check_sampled(prof.extras, 997)
    key = [k for k, _ in prof.funcs("heavy")]
    check(len(key) == 1 and key[0][1] == 0 and os.path.realpath(key[0][0]) == os.path.realpath(exe),
          f"stripped heavy keyed {key}, expected ({exe}, 0, 'heavy')")
    check_both(prof, "cpu-split-stripped")


def case_split_10k():
    prof, _ = split(opts=["--hz", "10000"], name="split10k")
    check_sampled(prof.extras, 10000)
    check_both(prof, "10 kHz")


def case_split_199():
    # under cpu, a rate the kernel's tick serves takes the CPU-time timer alone
    prof, _ = split(opts=["--hz", "199"], threads=2, name="split199")
    check_sampled(prof.extras, 199)
    check_both(prof, "199 Hz, 2 threads")
    check(len(prof.extras["threads"]) == 2, f"threads {prof.extras['threads']}")


def case_wall_split():
    """Under wall: no more time sampled than the run took."""
    prof, elapsed = split(opts=["-c", "wall"])
    ex = prof.extras
    check_sampled(ex, 997)
    check(ex["clock"] == "wall", "clock")
    total = sum(v[2] for v in prof.stats.values())
    check(total <= elapsed * 1.05, f"{total:.3f} s sampled in {elapsed:.3f} s of wall time")
    check_both(prof, "wall")


def per_thread_leaves(ex):
    """{tid: {"heavy": samples, "light": samples}} from the stack table."""
    per = {}
    for task, tid, frames, count, waiting in ex["stacks"]:
        leaf = frames[0][2]
        if leaf in ("heavy", "light"):
            per.setdefault(tid, {"heavy": 0, "light": 0})[leaf] += count
    return per


def case_threads():
    prof, _ = split(threads=3, name="threads")
    ex, nodes = prof.extras, prof.nodes
    check_sampled(ex, 997)
    # The whole-program tree: each thread's node calls its own stack's roots, shared
    # out by the thread's samples (sample mode has no traced roots).
    for t in ex["threads"]:
        node = [v for n, v in nodes.items() if n.startswith("<thread ") and
                n.endswith(" %d>" % t["tid"])]
        check(len(node) == 1 and sum(e[3] for e in node[0].values()) >= 0.5 * t["ttot"] > 0,
              "thread %d's node in the whole-program tree: %s (thread ttot %.3f)"
              % (t["tid"], node, t["ttot"]))
    per = per_thread_leaves(ex)
    check(len(per) == 3, f"{len(per)} threads sampled, expected 3: {per}")
    for tid, c in per.items():
        check(c["heavy"] > 0 and c["light"] > 0, f"thread {tid}: {c}")
    tids = {t["tid"] for t in ex["threads"]}
    check(set(per) <= tids and len(tids) == 3, f"thread table {tids} vs sampled {set(per)}")
    check_both(prof, "3 threads")


def sched(clock, rounds=R, crunch=CRUNCH, nap=NAP):
    """samples/native/sched sampled under `clock`: (Profile, what it measured it took)."""
    out = os.path.join(TMP, f"sched-{clock}.pstat")
    p = record(["-o", out, "-c", clock], [os.path.join(NATIVE, "sched"), str(rounds), str(crunch), str(nap)])
    return Profile(out), sched_measured(p.stdout)


def task_leaves(ex):
    """{task name: {(frames, waiting): samples}} from the stack table."""
    out = {}
    for task, tid, frames, count, waiting in ex["stacks"]:
        name = ex["tasks"][task]["name"] if task >= 0 else "<thread>"
        d = out.setdefault(name, {})
        names = tuple(f[2] for f in frames)
        d[names, bool(waiting)] = d.get((names, bool(waiting)), 0) + count
    return out


def case_sched_cpu():
    """Each task holds its own work only, sampled; nothing waits under cpu."""
    prof, _ = sched("cpu")
    ex = prof.extras
    check_sampled(ex, 997)
    tasks = ex["tasks"]
    check(sorted(t["name"] for t in tasks) == ["crunch", "crunch", "sleeper"], f"tasks {tasks}")
    check(not any(w for *_, w in ex["stacks"]), "no waiting stacks under cpu")
    for t in tasks:
        own, other = ("crunch_work", "sleeper_work") if t["name"] == "crunch" else ("sleeper_work", "crunch_work")
        check(funcs(t["stats"], own) and not funcs(t["stats"], other),
              f"{t['name']} task has {sorted(k[2] for k in t['stats'])}")


def case_sched_wall():
    prof, _ = sched("wall")
    ex = prof.extras
    check_sampled(ex, 997)
    leaves = task_leaves(ex)
    for name in ("crunch", "sleeper"):
        waits = {k: v for k, v in leaves.get(name, {}).items() if k[1]}
        check(waits, f"{name}: no wait stack")
        for (frames, _), n in waits.items():
            check(frames[0] == "task_yield" and frames[1] == "nap",
                  f"{name} waits at {frames[:4]}, expected task_yield <- nap")
    # the sleeper naps 3 x NAP a round: under wall a wait is sampled for as long as it
    # lasted (the switch event's tick weighs the time off), at least the nap
    naps = R * 3 * NAP / 1e3
    sleeper_wait = sum(n for (f, w), n in leaves["sleeper"].items() if w)
    check(sleeper_wait >= 0.8 * naps * 997, f"sleeper waited {sleeper_wait} ticks for {naps:.3f} s of naps")
    # waits land in task_yield's tt (rule 5), running time in the work functions
    check(prof.tt("task_yield") >= 0.8 * naps, f"task_yield tt {prof.tt('task_yield'):.3f} s")
    for t in ex["tasks"]:
        check(t["ttot"] > 0, f"task {t['name']} has no sampled time")
    # the scheduler's own samples (after a task finished, too) are not a task's
    for task, tid, frames, count, waiting in ex["stacks"]:
        names = [f[2] for f in frames]
        check(task == -1 or "run_scheduler" not in names, f"task {task} charged the scheduler: {names}")
        check(task >= 0 or not waiting, "a thread's own context never waits")


def toggled(n, seconds, pause):
    """cpu-split started with --no-start at 997 Hz, profiled in n windows of `seconds`
    with `pause` between them: the windows' Profiles."""
    tmpl = os.path.join(TMP, "t.%n.pstat")
    for f in glob.glob(tmpl.replace("%n", "*")):
        os.unlink(f)
    cmd = [BIN, "record", "--mode", "sample", "--hz", "997", "--no-start", "-o", tmpl, "--",
           os.path.join(CPU, "cpu-split"), "60"]
    p = subprocess.Popen(cmd, env=base_env(), cwd=TMP, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: catches(p.pid, signal.SIGUSR2), 60, "the toggle handler")
        time.sleep(pause)
        for i in range(1, n + 1):
            toggle_window(p.pid, tmpl, i, seconds)
            time.sleep(pause)
        check(p.poll() is None, "the program died")
    finally:
        p.kill()
        p.wait()
    files = sorted(glob.glob(tmpl.replace("%n", "*")))
    check(len(files) == n, f"{n} windows gave {files}")
    return [Profile(tmpl.replace("%n", str(i))) for i in range(1, n + 1)]


def case_toggle():
    """Four windows: four files, each sampled at 997 Hz, heavy and light in each, no
    more CPU sampled than the window lasted."""
    for i, prof in enumerate(toggled(4, 0.3, 0.1), 1):
        ex = prof.extras
        check_sampled(ex, 997)
        check_both(prof, f"window {i}")
        cpu = prof.tt("heavy") + prof.tt("light")
        window = ex["stop"] - ex["start"]
        check(cpu <= window * 1.1, f"window {i}: {cpu:.3f} s sampled in a {window:.3f} s window")


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
        ex = Profile(tmpl.replace("%n", str(i))).extras
        check_sampled(ex, 997)
        check(any(t["name"] == "serve" for t in ex["tasks"]), f"window {i}: no serve task")
        for task, tid, frames, count, waiting in ex["stacks"]:
            if waiting:
                check(task >= 0 and ex["tasks"][task]["name"] == "serve", f"window {i}: wait row {task}")
                check("wait_for" in [f[2] for f in frames[:3]], f"window {i}: serve waits at {frames[:3]}")
                waited += count
    check(waited > 0, "no connection was ever seen waiting")


def python_spin(seconds=SPIN_S):
    """CPython spinning `seconds` of CPU at module level: (Profile, coprof's lines)."""
    out = os.path.join(TMP, "py.pstat")
    code = f"import time\nt=time.process_time()\nwhile time.process_time()-t<{seconds}: sum(range(1000))\n"
    p = record(["-o", out], ["/usr/bin/python3", "-c", code], env=python_env())
    return Profile(out), [l for l in p.stderr.splitlines() if l.startswith("coprof:")]


def case_python():
    """Issue 12: in CPython the samples hold the Python frames, keyed as trace mode keys
    them, and nothing is said on stderr."""
    prof, lines = python_spin()
    check(not lines, f"nothing on stderr expected: {lines}")
    ex = prof.extras
    check_sampled(ex, 997)
    check(not any("Python" in n for n in ex["notes"]), f"notes {ex['notes']}")
    mod = prof.stats.get(("<string>", 1, "<module>"))
    check(mod is not None and mod[3] > 0, f"no <module> frame: {sorted(prof.stats)[:10]}")


def fork_spin(seconds=SPIN_S):
    """CPython that forks, then each process spins `seconds` of CPU: the two Profiles."""
    out = os.path.join(TMP, "fork.%p.pstat")
    for f in glob.glob(out.replace("%p", "*")):
        os.unlink(f)
    code = ("import os, time\n"
            "def spin():\n"
            "    t = time.process_time()\n"
            f"    while time.process_time() - t < {seconds}: sum(range(1000))\n"
            "pid = os.fork()\n"
            "spin()\n"
            "if pid: os.waitpid(pid, 0)\n")
    record(["-o", out], ["/usr/bin/python3", "-c", code], env=python_env())
    files = glob.glob(out.replace("%p", "*"))
    check(len(files) == 2, f"parent and child files expected: {files}")
    return [Profile(f) for f in files]


def case_fork():
    """The parent and the forked child each write a file holding its own samples (the
    timers followed the fork)."""
    pids = set()
    for prof in fork_spin():
        total = sum(v[2] for v in prof.stats.values())
        check(total > 0 and prof.funcs("spin"), f"{prof.path} (pid {prof.extras['pid']}): {total:.3f} s sampled")
        pids.add(prof.extras["pid"])
    check(len(pids) == 2, f"pids {pids}")


def waits(clock, hz, how):
    """waits.c HOW (ten 100-ms waits) sampled under `clock` at `hz` (None: the default
    rate): (what it printed, its stderr, its Profile or None: under cpu a program that
    only sleeps may take no sample, and write no file)."""
    out = os.path.join(TMP, f"waits-{clock}-{how}-{hz or 'default'}.pstat")
    opts = ["-c", clock] + (["--hz", str(hz)] if hz else [])
    p = record(["-o", out] + opts, [WAITS, how], default_hz=True)
    return p.stdout, p.stderr, Profile(out) if os.path.exists(out) else None


def waits_case(clock):
    """Issue 21.4: sampling never shortens a wait. Each way of blocking waits ten times
    100 ms, one call each, as a host that does not retry on EINTR; none comes back
    early, in both clocks, at the default rate and at 10 kHz. The ten programs (and
    Python's time.sleep at each rate) run at once: each waits a second and uses a few
    percent of a CPU at 10 kHz, and a wait cut short comes back early whatever runs
    beside it, so one after the other they only took ten times as long. Under wall
    the waits in epoll_wait are sampled there, for at least 80% of their second."""

    def native(hz, how):
        said, err, prof = waits(clock, hz, how)
        secs, early = said.split()
        check(int(early) == 0 and float(secs) >= 0.99,
              f"{clock} {hz or 'default'} Hz, {how}: {early} of 10 waits came back early, {secs} s")
        check("coprof:" not in err, f"stderr: {err!r}")
        check(clock == "cpu" or prof, f"{clock} {how}: no profile")
        if prof:
            check(prof.extras["hz"] == (hz or 99), f"hz {prof.extras['hz']}, expected {hz or 99} (the default)")
            if clock == "wall" and how == "epoll":
                waited = sum(v[2] for k, v in prof.stats.items() if "epoll_wait" in k[2])
                check(waited >= 0.8, f"epoll_wait charged {waited:.3f} s of 1 s asleep in it")
            os.unlink(prof.path)

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


def epoll_split(seconds):
    """waits.c split: 1 ms of CPU in burn(), then 1 ms asleep in epoll_wait, for
    `seconds`, sampled under cpu at 997 Hz: its Profile."""
    out = os.path.join(TMP, "epoll-split.pstat")
    record(["-o", out, "-c", "cpu", "--hz", "997"], [WAITS, "split", str(seconds)])
    return Profile(out)


def case_epoll_split():
    """Under cpu the samples land where the CPU was spent: burn() is sampled (that it
    holds 90% and epoll_wait at most 5% is the bench's)."""
    prof = epoll_split(0.3)
    check_sampled(prof.extras, 997)
    check(prof.nc("burn") > 0 and prof.ct("burn") > 0, f"burn: {prof.one('burn')[:4]}")


def no_perf(cmd, clock):
    """cmd under the shim in sample mode (997 Hz) with perf_event_open failing EACCES
    (strace injects it, as paranoid 3 would): (process, coprof's lines, path of the
    profile)."""
    strace = shutil.which("strace")
    check(strace is not None, "strace is needed (scripts/setup.sh installs it)")
    out = os.path.join(TMP, f"noperf-{clock}.pstat")
    env = base_env()
    env.pop("LD_PRELOAD", None)  # the shim goes to the traced program only (-E)
    env.update({"COPROF_MODE": "sample", "COPROF_OUT": out, "COPROF_HZ": "997", "COPROF_CLOCK": clock})
    preload = ASAN + ":" + LIB if ASAN else LIB
    if ASAN:
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # LeakSanitizer does not work under ptrace
    p = subprocess.run([strace, "-f", "-qq", "-o", "/dev/null", "-E", f"LD_PRELOAD={preload}",
                        "-e", "trace=perf_event_open", "-e", "inject=perf_event_open:error=EACCES"] + cmd,
                       env=env, cwd=TMP, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr}")
    return p, [l for l in p.stderr.splitlines() if l.startswith("coprof:")], out


def case_no_perf():
    """Where perf events are refused, cpu falls back to the CPU-time timer at the
    kernel's tick rate at most, and says so once on stderr and in the notes; wall
    samples nothing and says so."""
    p, lines, out = no_perf([os.path.join(CPU, "cpu-split"), str(SPLIT_S)], "cpu")
    check(len(lines) == 1 and "no perf events (Permission denied)" in lines[0], f"stderr: {lines}")
    prof = Profile(out)
    check(any("CPU-time timer" in n for n in prof.extras["notes"]), f"notes {prof.extras['notes']}")
    check_both(prof, "CPU-time timer")
    # wall has no harmless fallback (a timer would cut sleeps short): it samples nothing,
    # says why, and the program's waits keep their length
    p, lines, out = no_perf([WAITS, "usleep"], "wall")
    secs, early = p.stdout.split()
    check(int(early) == 0 and float(secs) >= 0.99, f"wall without perf: {early} waits cut short")
    check(len(lines) == 1 and "-c wall needs perf events" in lines[0], f"stderr: {lines}")
    check(not os.path.exists(out), "a profile was written with nothing sampled")


def unwinder(line):
    """The object throws.c's first line names, by its real path (the ASan runtime is
    preloaded from gcc's directory, linked from the library directory)."""
    check(line.startswith("unwinder "), f"throws printed {line!r}")
    name = line[len("unwinder "):]
    return os.path.realpath(name) if name.startswith("/") else name


# throws.c and throws-unw.c, and how many exceptions each throws
THROWERS = (("COPROF_THROWS", 600000), ("COPROF_THROWS_UNW", 100000))


def throws(exe, n, mode):
    """exe (a throws program) throwing n exceptions under the shim in `mode` at 2 kHz:
    (its stdout's lines, its Profile in sample mode, else None). Fails if it hangs (90
    s) or exits non-zero."""
    name = os.path.basename(exe)
    out = os.path.join(TMP, f"{name}-{mode}.pstat")
    env = base_env(COPROF_MODE=mode, COPROF_HZ="2000", COPROF_OUT=out)
    env["LD_PRELOAD"] = ASAN + ":" + LIB if ASAN else LIB
    if ASAN:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    p = subprocess.Popen([exe, os.environ["COPROF_THROWER"], str(n)], env=env, cwd=TMP,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()  # the child we started, by pid
        p.communicate()
        raise AssertionError(f"{name} under {mode} mode hung (90 s for {n} throws)")
    check(p.returncode == 0, f"{name} under {mode}: exit {p.returncode}: {stderr}")
    return stdout.splitlines(), Profile(out) if mode == "sample" else None


def case_cxx_throws():
    """A C program that loads C++ code at run time throws through the same unwinder with
    the shim preloaded as without it (the shim's libunwind stays out of the global scope),
    and sampling it at 2 kHz while it throws never hangs. throws-unw links libunwind
    itself, so its exceptions and the sampler share one libunwind: the lock it takes with
    every signal blocked must stay blocked to the tick (before: a tick in it waited
    forever for that lock); under ASan, whose sigprocmask hides libunwind's from the
    guard, a tick that lands in libunwind is not walked. (How many ticks went unwound,
    and throw_loop's share, are the bench's.)"""
    lib = os.environ.get("COPROF_THROWER")
    check(lib is not None, "no C++ compiler: throws was not built")
    for var, n in THROWERS:
        exe = os.environ[var]
        name = os.path.basename(exe)
        plain = subprocess.run([exe, lib, "10"], capture_output=True, text=True, timeout=60)
        check(plain.returncode == 0, f"{name} unprofiled: {plain.returncode} {plain.stderr}")
        for mode in ("trace", "sample"):
            lines, prof = throws(exe, n, mode)
            check(unwinder(lines[0]) == unwinder(plain.stdout.splitlines()[0]),
                  f"{name} under {mode}: {lines[0]!r}, unprofiled {plain.stdout.splitlines()[0]!r}")
            check(lines[1] == f"caught {n} of {n}", f"{name} under {mode}: {lines[1]!r}")
            if prof:
                total = sum(v[2] for v in prof.stats.values())
                check(total > 0.2 and prof.funcs("throw_loop"),
                      f"{name}: {total:.3f} s sampled, throw_loop: {prof.funcs('throw_loop')}")


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
        prof = Profile(out)
        ex = prof.extras
        for f in ("before_close", "after_close"):
            check(prof.nc(f) > 0, f"-c {clock}: {f} has no sample")
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
            prof = Profile(out)
            check(prof.extras["notes"].count(note) == 1, f"{what}: notes {prof.extras['notes']}")
            if mode == "seccomp-ioctl":
                check(prof.nc("sandboxed") > 0, f"{what}: sandboxed() has no sample")


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
