#!/usr/bin/env python3
"""runtimes.py CASE: coroutine runtimes no ucontext adapter covers, in trace and sample
mode, under both clocks. CASE is PROG-MODE-CLOCK, PROG one of asm (a hand-written
x86-64 switch no adapter knows), st (State Threads) and fiber (boost::context::fiber,
the fcontext adapter), or asm-plain and st-plain: the same built without
-finstrument-functions (sample mode only: their stacks are found at ticks alone). Each
program runs a heavy and a light coroutine that take turns, R rounds each, yielding
through task_yield, and says how much CPU time each one's work took by the thread's
clock, and the thread in all.

The cases assert what is exact: two tasks, each named by its runtime and holding its
own work only, real call counts (a suspension is not a return), where a coroutine
waits, no waiting stack where there can be none; and what holds whatever the load
(under wall, a wait holds at least the other coroutine's work). How close each task's
time comes to its work, sampled shares and upper bounds on times are
bench/native/accuracy.py's (`runtimes`), on the same programs at their full size."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import ASAN, Profile, base_env, check, funcs, one  # noqa: E402

BIN = os.environ["COPROF_BIN"]
TESTBIN = os.environ["COPROF_TESTBIN"]
TMP = tempfile.mkdtemp(prefix="coprof-runtimes-")
# The tests' size: R rounds of HEAVY and LIGHT ms of CPU. bench/native/accuracy.py runs
# them at FULL (6 rounds, 20 and 5 ms: 90 ticks for the light coroutine at HZ).
R, HEAVY, LIGHT = 4, 0.010, 0.0025
FULL = (6, 0.020, 0.005)
HZ = 2999  # sample mode's rate
RUNTIME = {"asm": "stack", "st": "stack", "fiber": "fcontext", "asm-plain": "stack",
           "st-plain": "stack", "fiber-plain": "fcontext"}


def profile(prog, mode, clock, rounds=R, heavy=HEAVY, light=LIGHT):
    """Runs rt-PROG under `coprof record`: (Profile, {"heavy": s, "light": s, "outside":
    s}), what the program says its coroutines' work took and the thread's CPU outside it."""
    out = os.path.join(TMP, f"{prog}-{mode}-{clock}.pstat")
    opts = ["--mode", mode, "-c", clock, "-o", out] + (["--hz", str(HZ)] if mode == "sample" else [])
    cmd = [BIN, "record"] + opts + ["--", os.path.join(TESTBIN, "rt-" + prog), str(rounds),
                                     str(heavy * 1e3), str(light * 1e3)]
    env = base_env()
    if ASAN and prog.startswith("st"):
        # libst never frees what st_init and joinable threads allocate: only its own
        # leaks are suppressed, ours are still reported
        supp = os.path.join(TMP, "lsan-libst.supp")
        with open(supp, "w") as f:
            f.write("leak:libst.so\n")
        env["LSAN_OPTIONS"] = (env.get("LSAN_OPTIONS", "") + f":suppressions={supp}").lstrip(":")
    p = subprocess.run(cmd, env=env, cwd=TMP, capture_output=True, text=True, timeout=120)
    said = re.search(rf"{rounds} rounds done; work ms heavy ([0-9.]+) light ([0-9.]+); thread ms ([0-9.]+)",
                     p.stdout)
    check(p.returncode == 0 and said, f"{cmd} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    check(not [l for l in p.stderr.splitlines() if l.startswith("coprof:")], f"coprof said: {p.stderr}")
    work = {"heavy": float(said[1]) / 1e3, "light": float(said[2]) / 1e3}
    work["outside"] = max(float(said[3]) / 1e3 - work["heavy"] - work["light"], 0.0)
    return Profile(out), work


def fn(task, name):
    """A task's entry for the function `name`."""
    return one(task["stats"], name)[1]


def tasks_by_work(prog, ex):
    """{'heavy': task, 'light': task}: every task is one of the two coroutines, named by
    its runtime, and holds its own work only (no cross-charging)."""
    tasks = ex["tasks"]
    check(len(tasks) == 2, f"{len(tasks)} tasks: {[(t['name'], t['runtime']) for t in tasks]}")
    out = {}
    for t in tasks:
        check(t["runtime"] == RUNTIME[prog], f"task {t['name']}: runtime {t['runtime']}, expected {RUNTIME[prog]}")
        kinds = [k for k in ("heavy", "light") if funcs(t["stats"], k + "_work")]
        check(len(kinds) == 1, f"task {t['name']} holds {sorted(k[2] for k in t['stats'])}")
        out[kinds[0]] = t
    check(sorted(out) == ["heavy", "light"], f"tasks {sorted(out)}")
    # a detected stack is named after its root function, a fiber after the first
    # function of the program's own that runs on it (its entry is Boost's template)
    for kind, t in out.items():
        check(t["name"] == kind + "_task", f"task named {t['name']}, expected {kind}_task")
    return out


def check_calls(prof, rounds=R):
    """A suspension is not a return: each function counts its real calls."""
    want = {"heavy_work": rounds, "light_work": rounds, "task_yield": 2 * rounds, "heavy_task": 1,
            "light_task": 1}
    for name, n in want.items():
        got = [v[1] for _, v in prof.funcs(name)]
        check(got == [n], f"{name}: ncalls {got}, expected [{n}]")


def check_cpu_work(tasks, work):
    """Under cpu a task's time holds its work (the work's clock is the thread's, read
    inside the task's span), whatever the load: at least 90% of it, the lower edge of
    the bench's ±10%."""
    for kind in ("heavy", "light"):
        check(tasks[kind]["ttot"] >= 0.9 * work[kind],
              f"{kind} task ttot {tasks[kind]['ttot']:.4f} s, its work took {work[kind]:.4f} s")


def no_waits(ex, why):
    check(not any(w for *_, w in ex["stacks"]), f"waiting stacks {why}")


def trace_cpu(prog):
    prof, work = profile(prog, "trace", "cpu")
    tasks = tasks_by_work(prog, prof.extras)
    check_calls(prof)
    check_cpu_work(tasks, work)
    for kind in ("heavy", "light"):
        check(fn(tasks[kind], kind + "_task")[3] >= 0.9 * work[kind],
              f"{kind}_task ct {fn(tasks[kind], kind + '_task')[3]:.4f} s, its work took {work[kind]:.4f} s")


# The innermost instrumented frame at the switch: st_usleep and the assembly switch are
# not instrumented; boost::context::fiber::resume is a header function, built into the
# program with its hooks.
SWITCHER = {"asm": "task_yield", "st": "task_yield", "fiber": "resume"}


def trace_wall(prog):
    prof, _ = profile(prog, "trace", "wall")
    tasks = tasks_by_work(prog, prof.extras)
    check_calls(prof)
    # The light coroutine waits while the heavy one works: at least (R - 1) x HEAVY
    # (R when the heavy one runs first; R - 1 when the light one does, as it ends
    # without waiting for the heavy one's last round) lands in the function that
    # called the switch (rule 5), and not in its callers.
    light = tasks["light"]
    wait = fn(light, SWITCHER[prog])[2]
    low = 0.9 * (R - 1) * HEAVY
    check(wait >= low, f"light {SWITCHER[prog]} tt {wait:.3f} s, expected >= {low:.3f}")
    check(fn(light, "task_yield")[3] >= wait, f"task_yield ct {fn(light, 'task_yield')[3]:.3f} s < the wait")
    check(fn(light, "light_task")[3] >= wait, f"light_task ct {fn(light, 'light_task')[3]:.3f} s < its wait")
    check(light["ttot"] >= wait, f"light ttot {light['ttot']:.3f} s < its wait")


def sample_cpu(prog):
    prof, _ = profile(prog, "sample", "cpu")
    tasks_by_work(prog, prof.extras)  # each task's work sampled in it, in it alone
    no_waits(prof.extras, "under cpu")


def wait_ticks(ex, task):
    """{frame names innermost first: ticks} of `task`'s wait stacks."""
    i = list(ex["tasks"]).index(task)
    out = {}
    for t, tid, frames, n, waiting in ex["stacks"]:
        if t == i and waiting:
            names = tuple(f[2] for f in frames)
            out[names] = out.get(names, 0) + n
    return out


def yielded_where(prog):
    """The frames a light coroutine's wait is sampled at, innermost first. The fcontext
    adapter sees the switch and walks the stack there (resume under task_yield); a
    switch found from the stack pointer has left the stack already, and its wait stack
    is the instrumented frames entered on it and not left (task_yield under light_task)."""
    return ("resume", "task_yield") if prog.startswith("fiber") else ("task_yield", "light_task")


def sample_wall(prog):
    """The light coroutine's waits are sampled where it yielded, and nowhere else."""
    prof, _ = profile(prog, "sample", "wall")
    tasks = tasks_by_work(prog, prof.extras)
    waits = wait_ticks(prof.extras, tasks["light"])
    check(waits, "the light coroutine has no wait stack")
    want = yielded_where(prog)
    for names, n in waits.items():
        # a fiber made, not yet run: Boost's entry jumps back to the maker at once
        made = prog.startswith("fiber") and names[0].startswith("fiber_entry<")
        check(names[:2] == want or made, f"light coroutine waits at {names[:4]}, expected {want}")
    check(sum(n for names, n in waits.items() if names[:2] == want) > 0, f"no wait sampled in {want}")


def plain_cpu(prog):
    """No hooks: each tick's stack is found from its outermost frame at fold time. Each
    coroutine's task holds its own work only, and the thread's own samples (the
    scheduler on the main stack) hold none of it."""
    prof, _ = profile(prog, "sample", "cpu")
    ex = prof.extras
    tasks_by_work(prog, ex)
    no_waits(ex, "under cpu")
    for task, tid, frames, n, waiting in ex["stacks"]:
        names = [f[2] for f in frames]
        if task is None or task < 0:
            check(not any(k + "_work" in names for k in ("heavy", "light")),
                  f"a coroutine's work charged to the thread: {names}")


def plain_wall(prog):
    """Under wall with no switch events a suspended coroutine's wait is not seen (the
    README's limit): no waiting stack, and each task holds its own work only."""
    prof, _ = profile(prog, "sample", "wall")
    tasks_by_work(prog, prof.extras)
    no_waits(prof.extras, "with no switch events")


def case(prog, mode, clock):
    """The case function of PROG-MODE-CLOCK."""
    if prog == "fiber-plain" and clock == "wall":
        return sample_wall  # the fcontext adapter sees the switches: waits as with hooks
    if prog.endswith("-plain"):
        return {"cpu": plain_cpu, "wall": plain_wall}[clock]
    return {"trace": {"cpu": trace_cpu, "wall": trace_wall},
            "sample": {"cpu": sample_cpu, "wall": sample_wall}}[mode][clock]


def main():
    if len(sys.argv) != 2 or sys.argv[1].count("-") not in (2, 3):
        sys.exit("usage: runtimes.py PROG-MODE-CLOCK")
    prog, mode, clock = sys.argv[1].rsplit("-", 2)
    try:
        case(prog, mode, clock)(prog)
    except AssertionError as e:
        print(f"FAIL {sys.argv[1]}: {e}")
        sys.exit(1)
    print(f"ok {sys.argv[1]}")


if __name__ == "__main__":
    main()
