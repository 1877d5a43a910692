#!/usr/bin/env python3
"""run.py --python EXE --source DIR --build DIR: coprof installed the way a user
installs it, on one Python.

A fresh venv (BUILD/venv-pip-LABEL), `pip wheel` of the source tree (meson-python, with
pip's build isolation: its build requirements come from PyPI), the wheel installed with
yappi, pytest, pytest-asyncio and greenlet beside it (with --direct: `pip install .`
of the tree, and those); then, with that venv's Python
only:
- yappi's README recipes (asyncio, threads, greenlet) with `import coprof as yappi`;
- ncall and nactualcall against yappi's on the same program, through the API alone and
  through the API inside `coprof record` (the preload: hooked once, not twice);
- the API and `coprof toggle` closing each other's windows (toggle_api.py);
- api_checks.py: the API, bad input, the files it writes;
- the `coprof` command pip put on PATH and `python -m coprof`: record, report, export;
- the pytest plugin (pytest_checks.py).
pip's downloads are cached in BUILD/pip-cache. Each step prints its time.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ["yappi>=1.7", "pytest", "pytest-asyncio", "greenlet"]
failures = []


def step(name, cmd, env=None, cwd=None, ok=None, timeout=600):
    """Runs cmd; checks its exit code (and ok(stdout) when given). Returns stdout."""
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    secs = time.monotonic() - t
    why = None
    if p.returncode != 0:
        why = "exit %d" % p.returncode
    elif ok is not None:
        try:
            why = ok(p.stdout)
        except Exception as e:  # noqa: the check itself failed: report it
            why = "%s: %s" % (type(e).__name__, e)
    print("%s %-58s %6.1f s" % ("FAIL" if why else "ok  ", name, secs), flush=True)
    if why:
        failures.append(name)
        print("  %s\n  $ %s\n--- stdout\n%s--- stderr\n%s---" % (
            why, " ".join(cmd), p.stdout[-4000:], p.stderr[-4000:]), flush=True)
    return p.stdout


def need(*words):
    def ok(out):
        missing = [w for w in words if not re.search(w, out)]
        return "missing from the output: %s" % missing if missing else None
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--label", required=True, help="X.Y.Z: names the venv")
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--direct", action="store_true",
                    help="`pip install .` (the source tree straight into the venv) "
                         "rather than `pip wheel .` and installing the wheel")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    venv = os.path.join(build, "venv-pip-" + a.label)
    wheels = os.path.join(build, "pip-wheel-" + a.label)
    work = os.path.join(build, "pip-work-" + a.label)
    env = dict(os.environ, PIP_CACHE_DIR=os.path.join(build, "pip-cache"),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    for k in ("LD_PRELOAD", "COPROF_PRELOAD", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(k, None)
    for d in (venv, wheels, work):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(work)
    py = os.path.join(venv, "bin", "python")
    pip = [py, "-m", "pip", "--quiet"]
    ver = "%s%s" % tuple(a.label.replace("system-", "").split(".")[:2])

    step("a fresh venv", [a.python, "-m", "venv", venv], env=env)
    if a.direct:
        step("pip install . (meson-python, build isolation)",
             pip + ["install", a.source] + PACKAGES, env=env)
        return checks(a, py, env, venv, work)
    step("pip wheel . (meson-python, build isolation)",
         pip + ["wheel", "--no-deps", "-w", wheels, a.source], env=env)
    found = [w for w in os.listdir(wheels)] if os.path.isdir(wheels) else []
    step("the wheel is this Python's (cp%s)" % ver, ["true"],
         ok=lambda _: None if len(found) == 1 and "-cp%s-cp%s" % (ver, ver) in found[0]
         else "wheels: %s" % found)
    if len(found) != 1:
        return finish()
    other = "3.11" if ver == "310" else "3.10"
    step("the wheel refused for CPython %s: pip says why" % other,
         ["sh", "-c", '"$@" 2>&1 | grep "is not a supported wheel"', "sh"] + pip +
         ["install", "--dry-run", "--target", os.path.join(work, "other"), "--python-version",
          other, "--only-binary=:all:", "--no-deps", os.path.join(wheels, found[0])], env=env)
    step("pip install the wheel, yappi, pytest, pytest-asyncio, greenlet",
         pip + ["install", os.path.join(wheels, found[0])] + PACKAGES, env=env)
    return checks(a, py, env, venv, work)


def checks(a, py, env, venv, work):
    """Everything after the install, with the venv's Python and commands only."""
    # From here on, the venv as a user has it: its bin/ first on PATH.
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env["PATH"]
    env["VIRTUAL_ENV"] = venv

    for recipe, words in (
            ("asyncio_wall", [r"asyncio_wall.py:7 foo\s+1\s", r"asyncio_wall.py:13 bar\s+1\s",
                              r"Clock type: WALL"]),
            # 3.10 names a function by co_name (run), later ones by co_qualname
            ("threads", [r"Function stats for \(\S+\) \(0\)", r"\(3\)", r"(Thread\.)?start\s+3\s",
                         r"_bootstrap\s+1\s"]),
            ("greenlet_wall", [r"greenlet_wall.py:9 (GreenletA\.)?run\s+1\s", r"time.sleep>\s+1\s"])):
        step("yappi's recipe as is: %s" % recipe,
             [py, os.path.join(HERE, "recipes", recipe + ".py")], env=env, cwd=work,
             ok=need(*words))
    times = {}
    step("asyncio recipe: foo, bar, baz wall times",
         [py, os.path.join(HERE, "recipe_times.py"), "coprof",
          os.path.join(HERE, "recipes", "asyncio_wall.py"), "foo", "bar", "baz"], env=env,
         cwd=work, ok=lambda o: times.update(json.loads(o.splitlines()[-1])) or
         check_times(times))

    workload = os.path.join(HERE, "workload.py")
    y = step("ncall: the workload under yappi", [py, workload, "yappi"], env=env, cwd=work)
    step("ncall: the workload under coprof's API", [py, workload, "coprof"], env=env,
             cwd=work, ok=lambda o: same(y, o))
    step("ncall: the API under the profile function (COPROF_PY_HOOK=profile)",
         [py, workload, "coprof"], env=dict(env, COPROF_PY_HOOK="profile"), cwd=work,
         ok=lambda o: same(y, o))
    step("ncall: the API inside `coprof record` (the preload's engine, hooked once)",
         ["coprof", "record", "--no-start", "-o", os.path.join(work, "rec.%n.pstat"), "--",
          py, workload, "coprof"], env=env, cwd=work,
         ok=lambda o: same(y, o) or (None if os.path.exists(os.path.join(work, "rec.1.pstat"))
                                     else "the API's window is not rec.1.pstat"))

    tdir = os.path.join(work, "toggle")
    os.makedirs(tdir)
    want = {"after_toggle_off": False, "after_toggle_on": True, "api": {"two": 2},
            "clock_refused": True,
            "files": ["t.1.pstat", "t.2.pstat"],
            "stop_warned": "coprof: stop(): profiling is not running; nothing done"}
    step("the API and coprof toggle on one process's windows",
         ["coprof", "record", "-c", "cpu", "--no-start", "-o", os.path.join(tdir, "t.%n.pstat"),
          "--", py, os.path.join(HERE, "toggle_api.py"), tdir], env=env, cwd=tdir,
         ok=lambda o: None if json.loads(o) == want else "want %s" % want)
    step("api_checks.py", [py, os.path.join(HERE, "api_checks.py"), work], env=env, cwd=work,
         ok=need("api_checks: 0 failed"))

    lib = run_out([py, "-c", "import coprof, os; print(os.path.dirname(coprof.shim_path()))"],
                  env).strip()
    step("the installed engine exports coprof_* only, the shim its API's, attach's and "
         "control pipe's doors",
         ["sh", "-c", "nm -D --defined-only %s/libcoprof.so; echo --; "
          "nm -D --defined-only %s/libcoprof-preload.so" % (lib, lib)], env=env,
         ok=exports_ok)

    sample = os.path.join(a.source, "samples", "python", "worker.py")
    rec = os.path.join(work, "worker.pstat")
    step("coprof record (pip's command, the bundled shim)",
         ["coprof", "record", "-c", "cpu", "-o", rec, "--", py, sample], env=env, cwd=work)
    step("coprof report", ["coprof", "report", rec, "--filter", "worker.py", "--limit", "3"],
         env=env, ok=need(r"worker\s+8\s", "Clock: cpu"))
    step("python -m coprof report --tasks", [py, "-m", "coprof", "report", rec, "--tasks"],
         env=env, ok=need(r"Tasks: \d+", "asyncio"))
    step("python -m coprof export --format callgrind",
         [py, "-m", "coprof", "export", rec, "--format", "callgrind", "-o",
          os.path.join(work, "worker.cg")], env=env)
    step("coprof report on a file the API saved",
         ["coprof", "report", os.path.join(work, "block.pstat")], env=env,
         ok=need(r"job\s+3\s"))
    step("import coprof", [py, "-X", "importtime", "-c", "import coprof"], env=env)
    if os.path.exists(os.path.join(HERE, "pytest_checks.py")):
        step("pytest --coprof", [py, os.path.join(HERE, "pytest_checks.py"), work], env=env,
             cwd=work, ok=need("pytest_checks: 0 failed"))
    return finish()


# The asyncio recipe's functions' wall ttot: foo sleeps 0.25 s in all, bar 0.2, baz 0.1.
def run_out(cmd, env):
    return subprocess.run(cmd, capture_output=True, text=True, env=env).stdout


def exports_ok(out):
    engine, shim = out.split("--\n")
    names = lambda t: [ln.split()[-1] for ln in t.splitlines() if ln.strip()]  # noqa: E731
    bad = [n for n in names(engine) if not n.startswith("coprof_")]
    bad += [n for n in names(shim) if n.startswith("coprof")
            and not n.startswith(("coprof_api_", "coprof_attach_", "coprof_control_"))]
    if not [n for n in names(shim) if n.startswith("coprof_api_")]:
        bad.append("(no coprof_api_* in the shim)")
    return "unexpected exports: %s" % bad if bad else None


def check_times(t):
    # at least the sleeps (a loaded machine only makes them longer)
    low = {"foo": 0.25, "bar": 0.2, "baz": 0.1}
    bad = {k: t.get(k) for k in low if t.get(k) is None or t[k][1] < low[k]}
    return "below the sleeps: %s" % bad if bad else None


def same(a, b):
    a, b = json.loads(a), json.loads(b)
    if a == b and len(a) >= 10:
        return None
    diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
    return "yappi, coprof differ by line: %s" % diff


def finish():
    print("pip: %d failed%s" % (len(failures), (": " + ", ".join(failures)) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
