#!/usr/bin/env python3
"""accuracy.py [--build DIR] [--runs N] [--keep DIR] [CHECK...]: how close trace and
sample mode come to what native programs measured of themselves, run after run.

These are the tolerance checks the tests left (tests/native/run.py, runtimes.py,
safety.py): each CHECK runs its test's workload, at the size the tolerance was set
for, through the test driver's own function, and computes the same values against the
same tolerance. The runs are interleaved (run 1 of every check, then run 2...), so a
change of load on the machine falls on all of them. At the end, one row per value: its
median, min and max over the runs, the tolerance, and how many values fell outside it
(a run outside is also said as it happens; --keep copies its profile to DIR).

Needs a build (default: build/ of this tree); the test drivers read the paths meson
gives them, set here from the build. bench/sample/accuracy.py does the same for
sample mode's tests, with this file's harness (`main`)."""
import argparse
import importlib.util
import math
import os
import shutil
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from coprof_test import ASAN, Profile  # noqa: E402


class Measure:
    """One value of one run: `value` in `unit`, inside [lo, hi] when the tolerance
    `tol` (its text) holds; `label` says which variant of the check it came from."""

    def __init__(self, name, value, lo, hi, unit, tol, label=""):
        self.name, self.value, self.lo, self.hi = name, value, lo, hi
        self.unit, self.tol, self.label = unit, tol, label

    def outside(self):
        return not self.lo <= self.value <= self.hi


def near(name, got, want, rel, outside=0.0, label=""):
    """got is want within rel (coprof_test's old near()), or above it by at most
    `outside` more: as the relative error, in %."""
    tol = f"±{rel:.0%}" + (" (+ the thread's CPU outside the work)" if outside else "")
    return Measure(name, 100 * (got / want - 1), -100 * rel, 100 * (rel + outside / want), "% off", tol, label)


def between(name, got, lo, hi, unit, tol, label=""):
    return Measure(name, got, lo, hi, unit, tol, label)


def share(name, got, want, points, label=""):
    """A share in %, want ± points."""
    return Measure(name, got, want - points, want + points, "%", f"{want:.1f} ±{points:g}", label)


def at_least(name, got, low, unit, tol=None, label=""):
    return Measure(name, got, low, math.inf, unit, tol or f">= {low:.4g}", label)


def at_most(name, got, high, unit, tol=None, label=""):
    return Measure(name, got, -math.inf, high, unit, tol or f"<= {high:.4g}", label)


# --- the test drivers, with the environment meson gives them -------------------------

def test_env(build):
    """The COPROF_* paths the test drivers read, as tests/*/meson.build sets them."""
    b = lambda *p: os.path.join(build, *p)  # noqa: E731
    paths = {"COPROF_BIN": b("viewer", "coprof"), "COPROF_PRELOAD_LIB": b("preload", "libcoprof-preload.so"),
             "COPROF_SAMPLES": b("samples", "native"), "COPROF_CPU_SAMPLES": b("samples", "cpu"),
             "COPROF_TESTBIN": b("tests", "native"), "COPROF_SRC": ROOT,
             "COPROF_WAITS": b("tests", "sample", "waits"), "COPROF_HOSTILE": b("tests", "sample", "hostile"),
             "COPROF_TRAPS": b("tests", "sample", "traps"), "COPROF_ALTSTACK": b("tests", "sample", "altstack"),
             "COPROF_SMALL_STACK": b("tests", "sample", "small-stack"),
             "COPROF_THROWER": b("tests", "sample", "libthrower.so"), "COPROF_THROWS": b("tests", "sample", "throws"),
             "COPROF_THROWS_UNW": b("tests", "sample", "throws-unw"), "COPROF_GOHOME": b("tests", "pprof", "gohome")}
    for k, v in paths.items():
        os.environ.setdefault(k, v)
    os.environ.setdefault("COPROF_ASAN_RUNTIME", "")


_drivers = {}


def driver(path):
    """The test driver at ROOT/path, imported once (as a module of its own name)."""
    if path not in _drivers:
        name = "driver_" + path.replace("/", "_").replace(".", "_")
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _drivers[path] = mod
    return _drivers[path]


# --- tests/native/run.py ------------------------------------------------------------

def sched_cpu():
    """native-sched-cpu: sched 5 rounds, crunch 20 ms, nap 10 ms, cpu clock: each work
    function's and task's CPU against what sched measured (10%), main's against the
    scheduler's own, the own times against the thread's (5%)."""
    prof, took, _ = driver("tests/native/run.py").sched("cpu", 5, 20, 10)
    ex = prof.extras
    light = 0.25 if ASAN else 0.10  # a sanitizer's hooks cost on so short a span
    out = [near("crunch_work ct vs its CPU", prof.ct("crunch_work"), took["crunch_work"], 0.10),
           near("sleeper_work ct vs its CPU", prof.ct("sleeper_work"), took["sleeper_work"], light),
           at_most("main ct - the scheduler's CPU", prof.ct("main") - took["scheduler"], 0.02, "s")]
    crunch = sorted(t["ttot"] for t in ex["tasks"] if t["name"] == "crunch")
    out += [near("crunch task ttot vs its CPU", got, want, 0.10) for got, want in zip(crunch, took["crunch"])]
    out += [near("sleeper task ttot vs its CPU", t["ttot"], took["sleeper"], light)
            for t in ex["tasks"] if t["name"] == "sleeper"]
    thread = [t for t in ex["threads"] if t["tid"] == ex["pid"]][0]
    out.append(near("own times vs the thread's ttot", sum(v[2] for v in prof.stats.values()), thread["ttot"], 0.05))
    return prof, out


def sched_wall():
    """native-sched-wall: main's ct holds the scheduler's idle sleeps (at least 90% of
    half the naps), which load shortens: the tasks' burns stretch past their naps."""
    prof, _, _ = driver("tests/native/run.py").sched("wall", 5, 20, 10)
    waits = 2 * 5 * 0.010 + 5 * 0.030
    return prof, [at_least("main ct under wall", prof.ct("main"), 0.9 * waits / 2, "s")]


def threads():
    """native-threads: mt, 2 threads, 3 rounds of 10 ms per coroutine: each task's CPU
    from 90% to 125% of its burns."""
    prof = driver("tests/native/run.py").mt(3, 10)
    return prof, [between("task ttot vs its burns", 100 * (t["ttot"] / 0.030 - 1), -10, 25, "% off",
                          "-10% to +25%", t["name"]) for t in prof.extras["tasks"]]


# --- tests/native/runtimes.py ----------------------------------------------------------

def rt_progs(kind):
    """The runtime test programs built (rt-PROG), of `kind`: hooked or plain."""
    rt = driver("tests/native/runtimes.py")
    return [p for p in rt.RUNTIME if p.endswith("-plain") == (kind == "plain")
            and os.path.exists(os.path.join(rt.TESTBIN, "rt-" + p))]


def rt_check(progs, mode, clock, measures):
    """Each of `progs` profiled in `mode` under `clock` at the runtimes' full size:
    (the Profiles, the values measures(rt, prof, work, tasks, prog) gives for each)."""
    rt = driver("tests/native/runtimes.py")
    profs, out = [], []
    for prog in progs:
        prof, work = rt.profile(prog, mode, clock, *rt.FULL)
        profs.append(prof)
        out += measures(rt, prof, work, rt.tasks_by_work(prog, prof.extras), prog)
    return profs, out


def rt_ttot(tasks, work, prog):
    """Each coroutine's task time against its work by the thread's clock: 10% (25% for
    the light one under a sanitizer), plus the thread's CPU outside the work."""
    return [near(f"{k} task ttot vs its work", tasks[k]["ttot"], work[k], 0.25 if ASAN and k == "light" else 0.10,
                 work["outside"], prog) for k in ("heavy", "light")]


def rt_sampled_work(rt, tasks, work, prog):
    """Each coroutine's sampled work function against its work: 25% (heavy, 360 ticks),
    50% (light, 90 ticks)."""
    return [near(f"sampled {k}_work ct vs its work", rt.fn(tasks[k], k + "_work")[3], work[k],
                 0.25 if k == "heavy" else 0.5, label=prog) for k in ("heavy", "light")]


def runtime_trace_cpu():
    """runtime-*-trace-cpu: task time and the entry's ct against the work; task_yield's
    own time under cpu below a tenth of the work."""
    def measures(rt, prof, work, tasks, prog):
        out = rt_ttot(tasks, work, prog)
        rounds, heavy, light = rt.FULL
        for k, nominal in (("heavy", heavy), ("light", light)):
            out.append(near(f"{k}_task ct vs its work", rt.fn(tasks[k], k + "_task")[3], work[k],
                            0.25 if ASAN and k == "light" else 0.10, work["outside"], prog))
            out.append(at_most(f"{k}: task_yield tt under cpu", rt.fn(tasks[k], "task_yield")[2],
                               0.1 * rounds * nominal + work["outside"], "s",
                               "< 10% of the work (+ CPU outside it)", prog))
        return out
    return rt_check(rt_progs("hooked"), "trace", "cpu", measures)


def runtime_trace_wall():
    """runtime-*-trace-wall: light_task's own time is not its wait (below a fifth)."""
    def measures(rt, prof, work, tasks, prog):
        light = tasks["light"]
        return [at_most("light_task tt / its wait",
                        rt.fn(light, "light_task")[2] / rt.fn(light, rt.SWITCHER[prog])[2], 0.2, "x", label=prog)]
    return rt_check(rt_progs("hooked"), "trace", "wall", measures)


def runtime_sample_cpu():
    """runtime-*-sample-cpu: task times and sampled work against the work."""
    def measures(rt, prof, work, tasks, prog):
        return rt_ttot(tasks, work, prog) + rt_sampled_work(rt, tasks, work, prog)
    return rt_check(rt_progs("hooked"), "sample", "cpu", measures)


def runtime_sample_wall():
    """runtime-*-sample-wall (and fiber-plain's wall): each task's wall time at least
    the heavy one's work; the light one's waits at the switch at least 80% of the heavy
    one's work while it waits; the heavy one waits less than the light one."""
    def measures(rt, prof, work, tasks, prog):
        rounds, heavy, _ = rt.FULL
        out = [at_least(f"{k} task ttot under wall", tasks[k]["ttot"], rounds * heavy, "s", label=prog)
               for k in ("heavy", "light")]
        want = rt.yielded_where(prog)
        yielded = sum(n for names, n in rt.wait_ticks(prof.extras, tasks["light"]).items() if names[:2] == want)
        out.append(at_least("light's wait ticks where it yielded", yielded, 0.8 * (rounds - 1) * heavy * rt.HZ,
                            "ticks", label=prog))
        hwait = sum(rt.wait_ticks(prof.extras, tasks["heavy"]).values())
        out.append(at_most("heavy's wait ticks / light's", hwait / yielded if yielded else math.inf, 1 - 1e-9,
                           "x", "< 1", prog))
        return out
    progs = rt_progs("hooked") + [p for p in rt_progs("plain") if p.startswith("fiber")]
    return rt_check(progs, "sample", "wall", measures)


def runtime_plain_cpu():
    """runtime-*-plain-sample-cpu: no hooks. Task times against the work, the light
    one's share of the two within 5 points of its work's, sampled work as with hooks."""
    def measures(rt, prof, work, tasks, prog):
        got = 100 * tasks["light"]["ttot"] / (tasks["light"]["ttot"] + tasks["heavy"]["ttot"])
        want = 100 * work["light"] / (work["light"] + work["heavy"])
        return rt_ttot(tasks, work, prog) + rt_sampled_work(rt, tasks, work, prog) + [
            between("light's share - its work's", got - want, -5, 5, "points", "±5", prog)]
    return rt_check(rt_progs("plain"), "sample", "cpu", measures)


def runtime_plain_wall():
    """runtime-*-plain-sample-wall but fiber's: each task at least 90% of its work, the
    light one under half the heavy one's time (its waits are not seen)."""
    def measures(rt, prof, work, tasks, prog):
        rounds, heavy, light = rt.FULL
        out = [at_least(f"{k} task ttot / its work", tasks[k]["ttot"] / (rounds * nominal), 0.9, "x", label=prog)
               for k, nominal in (("heavy", heavy), ("light", light))]
        return out + [at_most("light ttot / heavy ttot", tasks["light"]["ttot"] / tasks["heavy"]["ttot"], 0.5, "x",
                              label=prog)]
    return rt_check([p for p in rt_progs("plain") if not p.startswith("fiber")], "sample", "wall", measures)


# --- tests/native/safety.py ----------------------------------------------------------

def safety_run(mode, clock, prog):
    s = driver("tests/native/safety.py")
    _, out = s.record(mode, clock, prog)
    return s, Profile(out)


def uc_chain():
    """safety-uc-chain, sampled under wall: b_work's 400 ms sampled (at least 0.3 s), b
    waits only while a runs (50 ms), not while it works itself (at most 150 ticks)."""
    s, prof = safety_run("sample", "wall", "uc-chain")
    waited = sum(c for n, _, _, c, w in s.rows(prof.extras) if n == "b_entry" and w)
    return prof, [at_least("b_work ct", prof.ct("b_work"), 0.3, "s"),
                  at_most("b_entry's wait ticks", waited, 150, "ticks")]


def uc_stuck():
    """safety-uc-stuck, sampled: 400 ms of burn_main against 100 ms of burn_co, at
    least 2 to 1 (ticks are not deferred after setcontext)."""
    profs, out = [], []
    for clock in ("cpu", "wall"):
        s, prof = safety_run("sample", clock, "uc-stuck")
        profs.append(prof)
        main, co = s.samples_in(prof.extras, "burn_main"), s.samples_in(prof.extras, "burn_co")
        out.append(at_least("burn_main / burn_co ticks", main / co if co else 0.0, 2, "x", label=clock))
    return profs, out


def uc_migrate():
    """safety-uc-migrate, sampled: x_entry waits on the main thread only until the other
    thread resumes it (at most 100 ticks)."""
    profs, out = [], []
    for clock in ("cpu", "wall"):
        s, prof = safety_run("sample", clock, "uc-migrate")
        profs.append(prof)
        waited = sum(c for n, tid, _, c, w in s.rows(prof.extras) if n == "x_entry" and w)
        out.append(at_most("x_entry's wait ticks", waited, 100, "ticks", label=clock))
    return profs, out


CHECKS = {"sched-cpu": sched_cpu, "sched-wall": sched_wall, "threads": threads,
          "runtime-trace-cpu": runtime_trace_cpu, "runtime-trace-wall": runtime_trace_wall,
          "runtime-sample-cpu": runtime_sample_cpu, "runtime-sample-wall": runtime_sample_wall,
          "runtime-plain-cpu": runtime_plain_cpu, "runtime-plain-wall": runtime_plain_wall,
          "uc-chain": uc_chain, "uc-stuck": uc_stuck, "uc-migrate": uc_migrate}


# --- the harness ---------------------------------------------------------------------

def fmt(x):
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def summary(checks, values, errors, runs):
    """The markdown table: one row per check and value."""
    print(f"\n| check | value | unit | median | min | max | tolerance | outside |")
    print("|---|---|---|---|---|---|---|---|")
    for check in checks:
        for name, ms in values[check].items():
            v = [m.value for m in ms]
            bad = sum(m.outside() for m in ms)
            print(f"| {check} | {name} | {ms[0].unit} | {fmt(statistics.median(v))} | {fmt(min(v))} | "
                  f"{fmt(max(v))} | {ms[0].tol} | {bad} of {len(v)} |")
        if errors[check]:
            print(f"| {check} | (runs that failed) | | | | | | {len(errors[check])} of {runs} |")


def main(checks, doc):
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--keep", help="copy the profiles of runs with a value outside its tolerance here")
    ap.add_argument("checks", nargs="*", metavar="CHECK", help="of: " + ", ".join(checks))
    args = ap.parse_args()
    bad = [c for c in args.checks if c not in checks]
    if bad:
        ap.error(f"no check {bad}; checks: {', '.join(checks)}")
    test_env(os.path.abspath(args.build))
    chosen = args.checks or list(checks)
    values = {c: {} for c in chosen}
    errors = {c: [] for c in chosen}
    for run in range(1, args.runs + 1):
        for check in chosen:
            try:
                profs, ms = checks[check]()
            except Exception as e:  # the workload itself failed: said, counted, and on to the next
                errors[check].append(str(e))
                print(f"run {run} {check}: failed: {str(e)[:300]}", flush=True)
                continue
            profs = profs if isinstance(profs, list) else [profs]
            for m in ms:
                values[check].setdefault(m.name, []).append(m)
                if m.outside():
                    print(f"run {run} {check} {m.label}: {m.name} {fmt(m.value)} {m.unit}, outside {m.tol}",
                          flush=True)
                    if args.keep:
                        os.makedirs(args.keep, exist_ok=True)
                        for p in profs:
                            shutil.copy(p.path, os.path.join(args.keep, f"{check}-{run}-{os.path.basename(p.path)}"))
        print(f"run {run} of {args.runs} done", file=sys.stderr, flush=True)
    summary(chosen, values, errors, args.runs)
    for mod in _drivers.values():
        shutil.rmtree(mod.TMP, ignore_errors=True)


if __name__ == "__main__":
    main(CHECKS, __doc__)
