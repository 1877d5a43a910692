#!/usr/bin/env python3
"""repro-all.py: runs the reviewers' Python reproducers (a folder such as
../shared/repro/python, whose README says what each one showed) on every Python and,
on 3.12+, under both hook backends, and checks each behaves as that README expects.

usage: repro-all.py --coprof build/viewer/coprof --repro DIR [--python EXE ...]

Each program runs under `coprof record -c cpu` (the README's command) and, where
the expectation is "as without coprof", unprofiled too. Prints one line per program,
Python and backend (ok, FAIL with the reason, or n/a when the program does not
apply to that version) and exits 1 when any failed. The regression tests proper are
in tests/python/ (cases shapes, orphans, deep_drivers, debug_alloc, audit_gil,
code_freed, builtins_reused_def); this script checks the reviewers' own programs.
"""
import argparse
import os
import pstats
import re
import subprocess
import sys
import tempfile

PYENV = os.path.expanduser("~/.pyenv/versions")
DEFAULT_PYTHONS = [os.path.join(PYENV, v, "bin", "python3")
                   for v in ("3.10.13", "3.11.7", "3.12.1", "3.13.0")] + ["/usr/bin/python3"]

# The README's "(no file)" row, a deep chain of coroutines each driven by send() from
# the one above, is the test suite's program: each level must run in its own context,
# with after() once each.
DEEP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                    "python", "progs", "deep.py")


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def version(py):
    out = subprocess.run([py, "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout
    return tuple(int(x) for x in out.split())


class Runner:
    def __init__(self, coprof, repro, py, hook, tmp):
        self.coprof, self.repro, self.py, self.hook, self.tmp = coprof, repro, py, hook, tmp

    def env(self, **kw):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("COPROF_") and k not in ("LD_PRELOAD", "PYTHONMALLOC")}
        if self.hook:
            env["COPROF_PY_HOOK"] = self.hook
        env.update({k: str(v) for k, v in kw.items()})
        return env

    def record(self, args, **kw):
        """Runs PY args under coprof record -c cpu: (pstats dict, extras, process)."""
        out = os.path.join(self.tmp, "x.pstat")
        if os.path.exists(out):
            os.unlink(out)
        p = subprocess.run([self.coprof, "record", "-c", "cpu", "-o", out, "--", self.py]
                           + args, env=self.env(**kw), capture_output=True, text=True,
                           timeout=300)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-600:]))
        check(os.path.exists(out), "no profile written")
        import marshal
        with open(out, "rb") as f:
            marshal.load(f)
            extras = marshal.load(f)
        return pstats.Stats(out).stats, extras, p

    def plain(self, args, **kw):
        return subprocess.run([self.py] + args, env=self.env(**kw), capture_output=True,
                              text=True, timeout=300)

    def file(self, name):
        return os.path.join(self.repro, name)


def funcs(stats, name):
    return [(k, v) for k, v in stats.items() if k[2].split(".")[-1] == name]


def callers(stats, name):
    return {k[2].split(".")[-1] for f in funcs(stats, name) for k in f[1][4]}


def tasks_with(extras, fn):
    return [t for t in extras.get("tasks", []) if any(k[2] == fn for k in t["stats"])]


def xdev(r, ver):
    for args, kw in ((["-X", "dev", "-c", "print(1)"], {}),
                     (["-c", "print(1)"], {"PYTHONMALLOC": "debug"})):
        base = r.plain(args, **kw)
        _, _, p = r.record(args, **kw)
        check((p.stdout, p.returncode) == (base.stdout, base.returncode),
              "%s %s: %r, unprofiled %r" % (args[:2], kw, p.stdout, base.stdout))


def audit_thread_exit(r, ver):
    _, _, p = r.record([r.file("audit_thread_exit.py")])
    check("done" in p.stderr, "no 'done': %r" % p.stderr[-300:])


def audit_toggle_stop(r, ver):
    # The program sends itself the toggle: the window it stops is written.
    _, _, p = r.record([r.file("audit_toggle_stop.py")], COPROF_BUILTINS=1)
    check("done" in p.stderr, "no 'done': %r" % p.stderr[-300:])


def eager(r, ver, factory):
    if ver < (3, 12):
        return "n/a"
    args = [r.file("eager_factory.py"), "1"] if factory else [r.file("eager_start.py")]
    stats, extras, _ = r.record(args)
    check(callers(stats, "parent_work") == {"parent"}, "parent_work's callers %s" %
          callers(stats, "parent_work"))
    owners, kids = tasks_with(extras, "parent_work"), tasks_with(extras, "child")
    check(len(owners) == 1 and len(kids) == 1 and kids[0] is not owners[0],
          "parent_work in %s, child in %s" % ([t["name"] for t in owners],
                                              [t["name"] for t in kids]))
    if factory:
        check(owners[0]["name"] == "PARENT", "the parent task is named %r" %
              owners[0]["name"])


def orphan(r, ver):
    stats, extras, _ = r.record([r.file("orphan.py")])
    t = [t for t in extras.get("tasks", []) if t["name"] == "ORPHAN"]
    check(len(t) == 1 and t[0]["state"] == "finished", "ORPHAN: %s" %
          [x["state"] for x in t])
    check(callers(stats, "burn") == {"main"}, "burn's callers %s" % callers(stats, "burn"))
    check(all(x["name"] != "ORPHAN" for x in tasks_with(extras, "burn")), "burn in ORPHAN")


def bridge(r, ver):
    stats, extras, _ = r.record([r.file("bridge.py")])
    owners = tasks_with(extras, "request")
    check(len(owners) == 1 and any(k[2] == "main" for k in owners[0]["stats"]),
          "request in tasks %s" % [t["name"] for t in owners])
    check(callers(stats, "burn") == {"request"} and funcs(stats, "burn")[0][1][1] == 2,
          "burn called from %s" % callers(stats, "burn"))
    request_ct = funcs(stats, "request")[0][1][3]
    check(owners[0]["ttot"] >= 0.9 * request_ct, "task ttot %.4f < request ct %.4f" % (
        owners[0]["ttot"], request_ct))


def codeleak(r, ver):
    def rss(text):
        m = re.search(r"maxrss MiB (\d+)", text)
        check(m, "no maxrss line: %r" % text[-300:])
        return int(m.group(1))
    base = rss(r.plain([r.file("codeleak.py")]).stderr)
    _, _, p = r.record([r.file("codeleak.py")])
    mine = rss(p.stderr)
    check(mine <= base + 30, "max RSS %d MiB profiled, %d unprofiled" % (mine, base))
    return "ok (max RSS %d MiB, unprofiled %d)" % (mine, base)


def codealive(r, ver):
    _, _, p = r.record([r.file("codealive.py")])
    check("died: False" in p.stderr, p.stderr[-300:])


def heap_methoddef(r, ver):
    stats, _, _ = r.record([r.file("heap_methoddef.py")], COPROF_BUILTINS=1)
    n = {k[2]: v[1] for k, v in stats.items() if k[2].endswith("_len>")}
    check(n.get("<built-in method mymod.alpha_len>") == 1000 and
          n.get("<built-in method mymod.beta_len>") == 100000, "calls %s" % n)


def agen_finalize(r, ver):
    # The program takes sys.monitoring tool 3 itself, which coprof holds under the
    # monitoring backend (a documented limit): it runs under the profile backend.
    if ver < (3, 12) or r.hook == "monitoring":
        return "n/a"
    base = r.plain([r.file("agen_finalize_events.py")])
    _, _, p = r.record([r.file("agen_finalize_events.py")])
    check(p.stdout == base.stdout, "printed %r, unprofiled %r" % (p.stdout, base.stdout))


def deep(r, ver):
    stats, extras, _ = r.record([DEEP, "60"])
    levels = [t for t in extras.get("tasks", []) if t["name"].endswith("level")]
    check(len(levels) == 61, "%d level tasks" % len(levels))
    for t in levels:
        afters = [v[1] for k, v in t["stats"].items() if k[2] == "after"]
        check(afters == [1] and t["state"] == "finished", "task %s: after() %s, %s" % (
            t["name"], afters, t["state"]))


CHECKS = [
    ("-X dev / PYTHONMALLOC=debug", xdev),
    ("audit_thread_exit.py", audit_thread_exit),
    ("audit_toggle_stop.py", audit_toggle_stop),
    ("eager_start.py", lambda r, v: eager(r, v, False)),
    ("eager_factory.py 1", lambda r, v: eager(r, v, True)),
    ("orphan.py", orphan),
    ("bridge.py", bridge),
    ("codeleak.py", codeleak),
    ("codealive.py", codealive),
    ("heap_methoddef.py", heap_methoddef),
    ("agen_finalize_events.py", agen_finalize),
    ("send() 60 deep", deep),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coprof", required=True)
    ap.add_argument("--repro", required=True)
    ap.add_argument("--python", action="append")
    args = ap.parse_args()
    failed = 0
    for py in args.python or [p for p in DEFAULT_PYTHONS if os.path.exists(p)]:
        ver = version(py)
        for hook in (["profile", "monitoring"] if ver >= (3, 12) else [""]):
            for name, fn in CHECKS:
                with tempfile.TemporaryDirectory(prefix="coprof-repro-") as tmp:
                    r = Runner(os.path.abspath(args.coprof), args.repro, py, hook, tmp)
                    try:
                        res = fn(r, ver) or "ok"
                    except (Failed, subprocess.TimeoutExpired) as e:
                        res = "FAIL: %s" % e
                        failed += 1
                print("%-24s %d.%-3d %-10s %-30s %s" % (os.path.basename(os.path.dirname(
                    os.path.dirname(py))) if PYENV in py else py, ver[0], ver[1],
                    hook or "profile", name, res), flush=True)
    return 1 if failed else 0


sys.exit(main())
