"""coprof_test: the one harness of the integration-test drivers (tests/*/run.py and the
other drivers beside them).

- Loading a profile: Profile (a .pstat file's pstats dict and coprof extras, its
  whole-program tree checked once, by whole.py) and load (the same, as a pair).
- Finding functions and tasks: funcs, one (a function by name, optionally in a file),
  nc/tt/ct, tasks and task (a task's entry by name).
- Running: check, wait_for, catches (a process handles a signal), base_env, toggle,
  toggle_window, sched_measured (what the sched sample measured), resp_windows (a resp
  server profiled in windows under redis-benchmark) and run_cases.
- Third-party packages: venv_python (a venv with packages from PyPI, made once).

Tests assert what is exact (calls, keys, tree shape, which task got which function,
files, exit codes); tolerances on times and sampled shares are bench/'s. Runs in the
driver's process; reads COPROF_BIN and COPROF_ASAN_RUNTIME as meson sets them."""
import marshal
import os
import pstats
import glob
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from whole import check_tree, split  # noqa: E402

ASAN = os.environ.get("COPROF_ASAN_RUNTIME", "")


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


CONTROL_NAME = re.compile(r"^coprof\d\d[A-Za-z][0-9a-z]{6}$")


def control_name(pid):
    """The name of the shim's control thread in process pid, or None: "coprof", the
    signal, a run letter (upper case once it runs) and the count of requests it applied
    (preload/state/state.h)."""
    for comm in glob.glob("/proc/%d/task/*/comm" % pid):
        try:
            with open(comm) as f:
                name = f.read().strip()
        except OSError:
            continue
        if CONTROL_NAME.match(name):
            return name
    return None


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def catches(pid, signo):
    """The process has a handler for signo (the shim's toggle handler is installed)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signo - 1)))
    except OSError:
        pass
    return False


class Profile:
    """One coprof file: `stats`, pstats' dict of the program's own functions (the
    whole-program tree's synthetic ones taken out, as coprof's reader does, once the
    tree is checked); `extras`, coprof's second marshal object; `nodes`, {node name:
    {callee key: edge}} of the tree's thread and task nodes."""

    def __init__(self, path):
        self.path = path
        raw = pstats.Stats(path).stats
        with open(path, "rb") as f:
            marshal.load(f)
            self.extras = marshal.load(f)
        self.nodes = check_tree(raw, self.extras, lambda msg: check(False, "%s: %s" % (path, msg)))
        self.stats = split(raw, self.extras)[0]

    def funcs(self, name, file=None):
        return funcs(self.stats, name, file)

    def one(self, name, file=None):
        return one(self.stats, name, file)[1]

    def nc(self, name, file=None):
        return self.one(name, file)[1]

    def tt(self, name, file=None):
        return self.one(name, file)[2]

    def ct(self, name, file=None):
        return self.one(name, file)[3]

    def tasks(self):
        return self.extras.get("tasks", [])

    def task(self, name):
        return task(self.extras, name)


def load(path, nodes=None):
    """(stats, extras) of a coprof file, as Profile reads them; `nodes`, a dict, gets
    Profile's nodes."""
    prof = Profile(path)
    if nodes is not None:
        nodes.update(prof.nodes)
    return prof.stats, prof.extras


def funcs(stats, name, file=None):
    """[(key, entry)] of the functions called `name` (or Class.name, or a path's last
    part), in a file whose path holds `file` when it is given: a string, or a function
    of the path."""
    def in_file(path):
        return file is None or (file(path) if callable(file) else file in path)
    return [(k, v) for k, v in stats.items()
            if (k[2] == name or k[2].endswith("." + name)) and in_file(k[0])]


def one(stats, name, file=None):
    """(key, entry) of the one function `funcs` finds; fails when there are none or more."""
    found = funcs(stats, name, file)
    check(len(found) == 1, "%s: %d entries, expected one (of %s)" % (
        name, len(found), sorted({k[2] for k in stats})[:40]))
    return found[0]


def task(extras, name):
    """The task table's entry of the one task called `name`."""
    found = [t for t in extras.get("tasks", []) if t["name"] == name]
    check(len(found) == 1, "task %s: %d found" % (name, len(found)))
    return found[0]


def base_env(**extra):
    """The test's environment without any COPROF_* setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPROF_")}
    env.pop("LD_PRELOAD", None)
    if ASAN:
        env["LD_PRELOAD"] = ASAN
        # the sanitizer may not like our threads' exits; leaks are still reported
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.update(extra)
    return env


def toggle(pid, *opts):
    """`coprof toggle [OPTS] PID`: profiling on if it was off, off (the window's file is
    written) if it was on. It returns once the program has done it; its report line
    ("PID: profiling on", "PID: profiling off; wrote FILE") is returned. It waits 25 s
    for the program's answer unless OPTS says otherwise."""
    if "--timeout" not in opts:
        opts = ("--timeout", "25") + opts  # the answer's wait: 10 s by default, for a loaded machine
    p = subprocess.run([os.environ["COPROF_BIN"], "toggle", *opts, str(pid)], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.startswith(f"{pid}: "),
          f"coprof toggle {pid}: {p.returncode} {p.stdout!r} {p.stderr!r}")
    return p.stdout.strip()


def toggle_window(pid, tmpl, i, seconds):
    """Profiles window i of a process started with --no-start: toggles on, lets it run
    `seconds`, toggles off and waits for the window's file (tmpl with %n replaced by i)."""
    toggle(pid)
    time.sleep(seconds)
    toggle(pid)
    wait_for(lambda: os.path.exists(tmpl.replace("%n", str(i))), 20, f"window {i}")


def resp_windows(cmd, cwd, tmpl, toggles, requests, clients):
    """Runs cmd, a `coprof record --no-start -o TMPL ... resp 0`, in cwd; once the toggle
    handler is in, profiles `toggles` windows, each around one redis-benchmark run
    (`requests` GETs and SETs over `clients` connections) and waits for the window's
    file (tmpl with %n its number, from 1); then stops the server with SIGTERM and checks
    it stopped cleanly. The server is killed whatever fails."""
    p = subprocess.Popen(cmd, env=base_env(), cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        m = re.search(r"port (\d+)", line)
        check(m is not None, f"resp said {line!r}")
        port = m.group(1)
        wait_for(lambda: catches(p.pid, signal.SIGUSR2), 20, "the toggle handler")
        for i in range(1, toggles + 1):
            toggle(p.pid)
            b = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", port, "-t", "get,set",
                                "-n", str(requests), "-c", str(clients), "-q"],
                               capture_output=True, text=True, timeout=60)
            check(b.returncode == 0 and "SET" in b.stdout and "GET" in b.stdout,
                  f"redis-benchmark: {b.returncode} {b.stdout} {b.stderr}")
            toggle(p.pid)
            wait_for(lambda: os.path.exists(tmpl.replace("%n", str(i))), 20, f"window {i}")
            check(p.poll() is None, "the server died")
        p.send_signal(signal.SIGTERM)
        rest, err = p.communicate(timeout=30)
        check(p.returncode == 0 and "resp: stopped" in rest, f"exit {p.returncode}: {rest} {err}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def sched_measured(stdout):
    """What samples/native/sched says its work, its tasks and its scheduler took by the
    thread's CPU clock, in seconds: coprof's cpu clock reads that clock, so the CPU
    checks hold it to these, not to the nominal times. They differ when this VM's host takes the CPU away
    (the guest counts that as the running thread's time): a CI run's sleeper_work read
    12.5 ms for its nominal 10, and coprof rightly said so too."""
    m = re.search(r"^sched: CPU ms crunch_work ([0-9.]+) sleeper_work ([0-9.]+); tasks "
                  r"crunch-1 ([0-9.]+) crunch-2 ([0-9.]+) sleeper ([0-9.]+); scheduler ([0-9.]+)$",
                  stdout, re.M)
    check(m, f"sched said {stdout!r}")
    v = [float(x) / 1e3 for x in m.groups()]
    return {"crunch_work": v[0], "sleeper_work": v[1], "crunch": sorted(v[2:4]), "sleeper": v[4],
            "scheduler": v[5]}


def venv_python(python, name, packages, build, modules=None):
    """The interpreter of DIR/venv-NAME-X.Y, a venv made from `python` (X.Y its version)
    with `packages` from PyPI, DIR $COPROF_VENV_DIR or else `build` (the build
    directory). Made once; a lock keeps two tests from making it at once, and a venv
    whose pip failed is removed. `python` itself is never changed. It is ready when its
    interpreter finds `modules` (the packages' names by default): looked for, not
    imported (importing eventlet took a second a test)."""
    modules = modules or packages
    ver = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # COPROF_VENV_DIR: another build directory's venvs (scripts/test.sh points the
    # sanitizer build at the gcc build's, made minutes before: the same packages, and
    # making them took each build a minute of pip, mostly the network's).
    venv = os.path.join(os.environ.get("COPROF_VENV_DIR") or build, "venv-%s-%s" % (name, ver))
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import importlib.util as u, sys; "
             "sys.exit(not all(u.find_spec(m) for m in %r))" % list(modules)]

    def ready():
        return os.access(py, os.X_OK) and subprocess.run(probe, capture_output=True).returncode == 0

    if ready():
        return py
    # The first test to get here makes it, the others wait. flock, not a file made with
    # O_EXCL: a holder killed mid-install (a test run stopped) releases it.
    import fcntl
    import shutil
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready():
            shutil.rmtree(venv, ignore_errors=True)
            # No pip of its own (ensurepip took 3.6 s of CPU a venv): `python`'s pip
            # installs into it (--python).
            p = subprocess.run([python, "-m", "venv", "--without-pip", venv],
                               capture_output=True, text=True)
            check(p.returncode == 0, "cannot make %s: %s" % (venv, p.stderr[-1000:]))
            p = subprocess.run([python, "-m", "pip", "--python", py, "install", "-q",
                                "--disable-pip-version-check"] + list(packages),
                               capture_output=True, text=True, timeout=1200)
            if p.returncode != 0:
                shutil.rmtree(venv, ignore_errors=True)
            check(p.returncode == 0, "pip install %s into %s: %s"
                  % (" ".join(packages), venv, p.stderr[-2000:]))
    return py


def run_cases(namespace):
    """The drivers' entry point: `run.py CASE` runs namespace's case_CASE (dashes stand
    for underscores) and prints `ok CASE`, or `FAIL CASE: why` and exits 1 when a
    check fails."""
    cases = {name[5:].replace("_", "-"): fn for name, fn in namespace.items() if name.startswith("case_")}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        sys.exit(f"usage: run.py {{{','.join(cases)}}}")
    try:
        cases[sys.argv[1]]()
    except AssertionError as e:
        print(f"FAIL {sys.argv[1]}: {e}")
        sys.exit(1)
    print(f"ok {sys.argv[1]}")
