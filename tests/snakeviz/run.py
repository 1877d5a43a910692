#!/usr/bin/env python3
"""Opens coprof files in snakeviz, in a real browser, and reads what its icicle draws.

For each case: profile a real program with `coprof record`, load it as every test
does (coprof_test.Profile: the whole-program tree checked), serve the file with
snakeviz's own server (PyPI snakeviz, in a venv this script makes under the build
dir), load it in Debian's chromium, headless, driven by selenium through
chromium-driver, wait until the icicle is drawn and read the SVG: the names of the
cells drawn and the labels shown. The first icicle must start at coprof's
"<whole program>" and hold the main program's work and every kind of task's work.
Also checks that gprof2dot draws one connected graph from the same file. Screenshots
go to BUILD/meson-logs/snakeviz/CASE.png.

Anything missing (chromium, chromium-driver, the venv, a package) is a failure, not a
skip. Each step is bounded, with room for a loaded machine: the program's run 120 s,
server start retried on a fresh port (3 tries of 20 s), page load and drawing 60 s;
how long a case took is printed, not checked (meson's timeout bounds the whole).

usage: run.py BUILD_DIR SOURCE_DIR [CASE...]
       run.py BUILD_DIR SOURCE_DIR --venv-only   (makes the venv if missing, and exits)
"""
import atexit
import fcntl
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import Profile  # noqa: E402

RECORD_LIMIT = 120.0  # s, the profiled program's run
DRAW_WAIT = 60.0  # s
VENV_PACKAGES = ["snakeviz", "selenium", "gprof2dot"]
PROFILE_DIR = tempfile.mkdtemp(prefix="coprof-chromium-")  # the browser's, removed at exit
atexit.register(shutil.rmtree, PROFILE_DIR, True)


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def base_python():
    """A Python to make the venv with: pyenv's newest, else Debian's."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for v in ("3.12.1", "3.11.7", "3.13.0", "3.10.13"):
        p = os.path.join(root, "versions", v, "bin", "python3")
        if os.access(p, os.X_OK):
            return p
    return "/usr/bin/python3"


def ensure_venv(build):
    """BUILD/venv-snakeviz with snakeviz, selenium and gprof2dot; made if missing."""
    venv = os.path.join(build, "venv-snakeviz")
    py = os.path.join(venv, "bin", "python")
    check = [py, "-c", "import snakeviz, selenium, gprof2dot"]
    if os.access(py, os.X_OK) and subprocess.run(check, capture_output=True).returncode == 0:
        return venv
    # Two test processes may get here at once: the first makes it, the other waits.
    # flock, not a file made with O_EXCL: a holder killed mid-install releases it.
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (os.access(py, os.X_OK) and subprocess.run(check, capture_output=True).returncode == 0):
            shutil.rmtree(venv, ignore_errors=True)
            r = subprocess.run([base_python(), "-m", "venv", venv], capture_output=True, text=True)
            if r.returncode:
                fail("cannot make the venv %s: %s" % (venv, r.stderr.strip()))
            r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
                               + VENV_PACKAGES, capture_output=True, text=True)
            if r.returncode:
                fail("pip install %s into %s: %s" % (" ".join(VENV_PACKAGES), venv,
                                                     r.stderr.strip()[-2000:]))
    return venv


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(venv, path, log):
    """snakeviz's server on a free port; retried on a new port if it does not answer."""
    for attempt in range(3):
        port = free_port()
        proc = subprocess.Popen([os.path.join(venv, "bin", "python"), "-m", "snakeviz", "-s",
                                 "-H", "127.0.0.1", "-p", str(port), path],
                                stdout=log, stderr=subprocess.STDOUT)
        url = "http://127.0.0.1:%d/snakeviz/%s" % (port, urllib.parse.quote(path, safe=""))
        deadline = time.time() + 20
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        return proc, url
            except OSError:
                time.sleep(0.2)
        stop(proc)
    fail("snakeviz's server did not answer for %s (3 tries of 20 s; log %s)" % (path, log.name))


def stop(proc):
    if proc.poll() is None:
        proc.terminate()  # our own child, by pid
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def browser(venv):
    """Chromium, headless, through chromium-driver (Debian's packages)."""
    for exe in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not os.access(exe, os.X_OK):
            fail(exe + " is missing: scripts/setup.sh installs chromium and chromium-driver")
    sys.path.insert(0, next(
        os.path.join(venv, "lib", d, "site-packages") for d in os.listdir(os.path.join(venv, "lib"))))
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1600,1000", "--user-data-dir=" + PROFILE_DIR):
        opts.add_argument(a)
    last = None
    for _ in range(3):
        try:
            d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
            d.set_page_load_timeout(DRAW_WAIT)
            d.set_script_timeout(DRAW_WAIT)
            return d
        except Exception as e:  # the driver failing to start under load: try again
            last = e
            time.sleep(1)
    fail("chromium did not start: %s" % last)


# What the icicle drew: every cell's function (d3 data bound to the rects) and every
# label left visible (snakeviz removes the labels that do not fit their cell).
READ_SVG = """
const rects = Array.from(document.querySelectorAll('#chart svg rect'))
    .filter(r => r.__data__ && r.__data__.name);
const labels = Array.from(document.querySelectorAll('#chart svg text'))
    .map(t => t.textContent);
return {cells: rects.map(r => [r.__data__.name, r.__data__.depth, +r.getAttribute('width')]),
        labels: labels};
"""


def icicle(driver, url, shot):
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(url)
    try:
        WebDriverWait(driver, DRAW_WAIT, 0.2).until(
            lambda d: d.execute_script(
                "return document.querySelectorAll('#chart svg rect').length > 1 && "
                "document.querySelectorAll('#chart svg text').length > 0"))
    except Exception:
        driver.save_screenshot(shot)
        fail("the icicle was not drawn within %.0f s (screenshot %s)" % (DRAW_WAIT, shot))
    time.sleep(0.5)  # labels that do not fit are removed right after drawing
    got = driver.execute_script(READ_SVG)
    driver.save_screenshot(shot)
    return got


def cell_func(name):
    """'file:line(func)' -> func."""
    m = re.match(r"^(.*):(\d+)\((.*)\)$", name)
    return m.group(3) if m else name


def check_gprof2dot(venv, path):
    """gprof2dot, every node and edge kept: one connected graph."""
    r = subprocess.run([os.path.join(venv, "bin", "gprof2dot"), "-f", "pstats", "-n0", "-e0", path],
                       capture_output=True, text=True, timeout=60)
    if r.returncode:
        fail("gprof2dot %s: %s" % (path, r.stderr.strip()))
    nodes = set(re.findall(r"^\s*(\d+) \[", r.stdout, re.M))
    parent = {n: n for n in nodes}

    def find(n):
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n
    for a, b in re.findall(r"^\s*(\d+) -> (\d+) \[", r.stdout, re.M):
        parent[find(a)] = find(b)
    parts = {find(n) for n in nodes}
    if len(nodes) < 2 or len(parts) != 1:
        fail("gprof2dot: %d nodes in %d parts, expected one connected graph" % (len(nodes), len(parts)))
    return len(nodes)


def run_case(name, argv, rec, must, build, venv, driver, outdir):
    """Profiles argv (coprof record options `rec`), opens the file in snakeviz; every regex of `must` has to match the
    function of some cell of the first icicle."""
    t0 = time.time()
    path = os.path.join(outdir, name + ".pstat")
    coprof = os.path.join(build, "viewer", "coprof")
    env = dict(os.environ)
    asan = os.environ.get("COPROF_ASAN_RUNTIME", "")
    if asan:  # the sanitizer build: its runtime first (record adds the shim after it)
        env["LD_PRELOAD"] = asan
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # CPython leaks at exit by design
    r = subprocess.run([coprof, "record", "-o", path] + rec + ["--"] + argv, capture_output=True,
                       text=True, timeout=RECORD_LIMIT, env=env)
    if r.returncode or not os.path.exists(path):
        fail("%s: coprof record: %s" % (name, r.stderr.strip()))
    try:
        Profile(path)
    except AssertionError as e:
        fail("%s: %s" % (name, e))
    with open(os.path.join(outdir, name + ".server.log"), "w") as log:
        proc, url = start_server(venv, path, log)
        try:
            got = icicle(driver, url, os.path.join(outdir, name + ".png"))
        finally:
            stop(proc)
    cells, labels = got["cells"], got["labels"]
    roots = [c for c in cells if c[1] == 0]
    if len(roots) != 1 or cell_func(roots[0][0]) != "<whole program>":
        fail("%s: the icicle's root is %s, expected <whole program>" % (name, roots))
    if not any(l.startswith("~:0(<whole program>)") for l in labels):
        fail("%s: no visible '<whole program>' label among %s" % (name, labels[:10]))
    funcs = {cell_func(c[0]) for c in cells}
    for pat in must:
        if not any(re.search(pat, f) for f in funcs):
            fail("%s: no cell of the first icicle matches %r; it drew %s"
                 % (name, pat, sorted(funcs)))
    nodes = check_gprof2dot(venv, path)
    took = time.time() - t0
    print("ok %s: %d cells, %d labels, root <whole program>, %d gprof2dot nodes connected, "
          "%.1f s; screenshot %s" % (name, len(cells), len(labels), nodes, took,
                                     os.path.join(outdir, name + ".png")))


def cases(build, src):
    worker = os.path.join(src, "samples", "python", "worker.py")
    py = "/usr/bin/python3"
    sched = os.path.join(build, "samples", "native", "sched")
    mt = os.path.join(build, "samples", "native", "mt")
    # worker.py: the main coroutine builds the payloads (make_job), eight worker tasks
    # decode them (decode_payload, evaluate) and wait on the "database" (save): the
    # latter only tasks call. The eight tasks share one node, their root coroutine's
    # (issue 37): one wide block, not eight slivers.
    py_must = [r"^<module>$", r"^<thread ", "^<tasks: worker \u00d78>$", r"^main$", r"make_job",
               r"^worker$", r"^handle$", r"decode_payload", r"save"]
    # Under wall the database waits of 50 ms (the default) made each task's
    # decode_payload 0.045-0.065% of the whole program, at snakeviz's cutoff, and it
    # went undrawn one run in a few; waits of 5 ms put it at 0.27-0.42%, the waits (save)
    # still a tenth of each task.
    out = []
    for clock, args in (("cpu", []), ("wall", ["200", "8", "0.005"])):
        out.append(("asyncio-" + clock, [py, worker] + args, ["-c", clock], py_must))
    # sched: a ucontext scheduler, two "crunch" tasks and a "sleeper" on the main thread.
    sched_must = [r"^main$", r"^<thread sched \d+>$", "^<tasks: crunch \u00d72>$",
                  r"^<task sleeper>$", r"^crunch_work$", r"^sleeper_work$"]
    # mt: the main thread starts and joins worker threads, each running "ping" and
    # "pong" coroutines. Under cpu main costs next to nothing (below snakeviz's cutoff);
    # under wall it waits for the workers, so it is drawn too.
    mt_must = [r"^<thread worker-\d+ \d+>$", r"^worker_main$", "^<tasks: ping \u00d72>$",
               "^<tasks: pong \u00d72>$", r"^burn$"]
    for clock in ("cpu", "wall"):
        out.append(("sched-" + clock, [sched], ["-c", clock], sched_must))
        out.append(("mt-" + clock, [mt], ["-c", clock],
                    mt_must + ([r"^main$", r"^<thread mt \d+>$"] if clock == "wall" else [])))
    return out


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    build, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if sys.argv[3:] == ["--venv-only"]:  # scripts/test.sh, while the build compiles
        print(ensure_venv(build))
        return
    want = set(sys.argv[3:])
    outdir = os.path.join(build, "meson-logs", "snakeviz")
    os.makedirs(outdir, exist_ok=True)
    venv = ensure_venv(build)
    driver = browser(venv)
    try:
        for name, argv, rec, must in cases(build, src):
            if want and name not in want:
                continue
            run_case(name, argv, rec, must, build, venv, driver, outdir)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
