#!/usr/bin/env python3
"""accuracy.py [--build DIR] [--runs N] [--keep DIR] [CHECK...]: sample mode's shares
and sampled times against what the programs did, run after run.

These are the tolerance checks the sample-mode tests left (tests/sample/run.py, and
tests/pprof/run.py's windows-sample): each CHECK runs its test's workload, at the size
the tolerance was set for, through the test driver's own function, and computes the
same values against the same tolerance: cpu-split's heavy() has 2/3 of heavy+light's
own time, sched's tasks their CPU, CPython's spin its 0.3 s... The harness is
bench/native/accuracy.py's: runs interleaved, then per value its median, min and max,
the tolerance and how many values fell outside it."""
import importlib.util
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("native_accuracy", os.path.join(HERE, "..", "native", "accuracy.py"))
acc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(acc)
ASAN, at_least, at_most, between, driver, share = acc.ASAN, acc.at_least, acc.at_most, acc.between, acc.driver, acc.share
from coprof_test import Profile, funcs  # noqa: E402 (tests/lib, on the path acc set)

SPLIT = 200.0 / 3  # heavy's share of heavy + light, %


def sample():
    return driver("tests/sample/run.py")


def heavy_share(prof, points, label=""):
    """heavy() has 2/3 of heavy+light's own time, within `points`."""
    h, l = prof.tt("heavy"), prof.tt("light")
    return share("heavy's share of heavy+light", 100 * h / (h + l), SPLIT, points, label)


def split():
    """sample-split-cpu, -nofp, -stripped: 1.5 s at 997 Hz, the 2:1 split within 5 points."""
    profs, out = [], []
    for exe in ("cpu-split", "cpu-split-nofp", "cpu-split-stripped"):
        prof, _ = sample().split(exe, seconds=1.5)
        profs.append(prof)
        out.append(heavy_share(prof, 5, exe))
    return profs, out


def per_cpu_s(prof):
    """Samples of heavy and light per CPU second sampled in them."""
    return (prof.nc("heavy") + prof.nc("light")) / (prof.tt("heavy") + prof.tt("light"))


def split_10k():
    """sample-split-10k: the split within 5 points; at least half the ticks asked for
    per CPU second (a loaded CPU restarts the task clock's period at each preemption:
    fewer, heavier ticks)."""
    prof, _ = sample().split(opts=["--hz", "10000"], seconds=1.5, name="split10k")
    return prof, [heavy_share(prof, 5), at_least("samples per CPU s", per_cpu_s(prof), 5000, "/s")]


def split_199():
    """sample-split-199: 2.5 s on 2 threads at 199 Hz (the CPU-time timer alone): the
    split within 5 points, 50% to 150% of the rate asked."""
    prof, _ = sample().split(opts=["--hz", "199"], seconds=2.5, threads=2, name="split199")
    return prof, [heavy_share(prof, 5),
                  between("samples per CPU s", per_cpu_s(prof), 99.5, 298.5, "/s", "199 ±50%")]


def wall_split():
    """sample-wall-split: the split under wall within 8 points."""
    prof, _ = sample().split(opts=["-c", "wall"], seconds=1.5)
    return prof, [heavy_share(prof, 8)]


def threads():
    """sample-threads: 1 s on 3 threads: each thread's split within 10 points of its
    samples, all together within 5."""
    prof, _ = sample().split(seconds=1, threads=3, name="threads")
    out = [share("a thread's heavy share", 100 * c["heavy"] / (c["heavy"] + c["light"]), SPLIT, 10, str(tid))
           for tid, c in sample().per_thread_leaves(prof.extras).items()]
    return prof, out + [heavy_share(prof, 5)]


def sched_cpu():
    """sample-sched-cpu: sched 5 rounds, crunch 40 ms, nap 20 ms: each crunch task's
    sampled crunch_work within 20% of the task's CPU, the sleeper's work within 50%."""
    prof, took = sample().sched("cpu", 5, 40, 20)
    crunch = sorted(funcs(t["stats"], "crunch_work")[0][1][3] for t in prof.extras["tasks"] if t["name"] == "crunch")
    out = [acc.near("crunch_work ct vs its task's CPU", c, want, 0.2) for c, want in zip(crunch, took["crunch"])]
    out += [acc.near("sleeper_work ct vs its CPU", funcs(t["stats"], "sleeper_work")[0][1][3],
                     took["sleeper_work"], 0.5) for t in prof.extras["tasks"] if t["name"] == "sleeper"]
    return prof, out


def toggle():
    """sample-toggle: four toggled windows of 0.6 s on cpu-split: each one's split
    within 10 points."""
    profs = sample().toggled(4, 0.6, 0.3)
    return profs, [heavy_share(p, 10, f"window {i}") for i, p in enumerate(profs, 1)]


def python():
    """sample-python: CPython spinning 0.3 s of CPU: 0.2 to 0.6 s sampled, <module> at
    least 80% of it less 0.05 s (the interpreter's start and end)."""
    prof, _ = sample().python_spin(0.3)
    total = sum(v[2] for v in prof.stats.values())
    mod = prof.stats.get(("<string>", 1, "<module>"), (0, 0, 0, 0))
    return prof, [between("sampled", total, 0.2, 0.6, "s", "0.2 to 0.6 for 0.3 s of CPU"),
                  acc.Measure("<module>'s share", 100 * mod[3] / total, 100 * (0.8 - 0.05 / total), math.inf,
                              "%", ">= 80% of all less 0.05 s")]


def fork():
    """sample-fork: parent and child each spin 0.3 s of CPU: at least 0.15 s sampled in each."""
    profs = sample().fork_spin(0.3)
    return profs, [at_least("sampled per process", sum(v[2] for v in p.stats.values()), 0.15, "s")
                   for p in profs]


def waits_epoll():
    """sample-waits-wall's epoll: ten 100-ms epoll_waits under wall, at the default
    rate and at 10 kHz: 0.8 to 1.2 s charged to epoll_wait."""
    profs, out = [], []
    for hz in (None, 10000):
        _, _, prof = sample().waits("wall", hz, "epoll")
        profs.append(prof)
        waited = sum(v[2] for k, v in prof.stats.items() if "epoll_wait" in k[2])
        out.append(between("epoll_wait's time", waited, 0.8, 1.2, "s", "0.8 to 1.2 of 1 s asleep",
                           f"{hz or 99} Hz"))
    return profs, out


def epoll_split():
    """sample-epoll-split: 2 s of 1 ms in burn(), 1 ms asleep in epoll_wait, under cpu at
    997 Hz: burn (and what it calls) at least 90% of the samples, epoll_wait at most 5%."""
    prof = sample().epoll_split(2)
    total = sum(v[2] for v in prof.stats.values())
    epoll = sum(v[2] for k, v in prof.stats.items() if "epoll_wait" in k[2])
    return prof, [at_least("burn's share", 100 * prof.ct("burn") / total, 90, "%"),
                  at_most("epoll_wait's share", 100 * epoll / total, 5, "%")]


def no_perf():
    """sample-no-perf: cpu-split 1.5 s with perf events refused (the CPU-time timer):
    the split within 8 points."""
    s = sample()
    _, _, out = s.no_perf([os.path.join(s.CPU, "cpu-split"), "1.5"], "cpu")
    prof = Profile(out)
    return prof, [heavy_share(prof, 8)]


def cxx_throws():
    """sample-cxx-throws, sampled at 2 kHz (not under a sanitizer, as the test did):
    under 1% of the sampled time in ticks not unwound, throw_loop at least 80%."""
    if ASAN:
        return [], []
    s, profs, out = sample(), [], []
    for var, n in s.THROWERS:
        exe = os.environ[var]
        _, prof = s.throws(exe, n, "sample")
        profs.append(prof)
        total = sum(v[2] for v in prof.stats.values())
        alone = prof.extras["dropped"].get("sample stacks not unwound", 0) / prof.extras["hz"]
        name = os.path.basename(exe)
        out += [at_most("time in ticks not unwound", 100 * alone / total, 1, "%", label=name),
                at_least("throw_loop's share", 100 * prof.ct("throw_loop") / total, 80, "%", label=name)]
    return profs, out


_windows = [0]


def pprof_windows():
    """pprof-windows-sample: cpu-split 1.5 s in 0.2-s windows at 997 Hz: the windows'
    heavy share of heavy+light samples within 8 points."""
    _windows[0] += 1
    _, ws, leaves = driver("tests/pprof/run.py").sampled_windows(f"ws{_windows[0]}")
    return [], [share("heavy's share of the windows' samples",
                      100 * leaves["heavy"] / max(1, leaves["heavy"] + leaves["light"]), SPLIT, 8)]


CHECKS = {"split": split, "split-10k": split_10k, "split-199": split_199, "wall-split": wall_split,
          "threads": threads, "sched-cpu": sched_cpu, "toggle": toggle, "python": python, "fork": fork,
          "waits-epoll": waits_epoll, "epoll-split": epoll_split, "no-perf": no_perf,
          "cxx-throws": cxx_throws, "pprof-windows": pprof_windows}

if __name__ == "__main__":
    acc.main(CHECKS, __doc__)
