#!/usr/bin/env python3
"""creds.py CASE: processes that change their credentials under the shim (issue 20).

A root-started master (tests/native/dropper.c, or Debian's nginx) forks workers that
switch to `nobody` (65534) and then work; the profile's directory belongs to root, so
only coprof-keeper can make their files. Each case asserts that every process's file
is written, readable, owned by the user the worker runs as, and holds that process's
own work; and that setpriv, which sets per-thread capability state before setresuid,
runs under the shim. Must run as root (the cases say so and fail otherwise)."""
import glob
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import ASAN, Profile, base_env, catches, check, run_cases, toggle, wait_for  # noqa: E402

BIN = os.environ["COPROF_BIN"]
LIB = os.environ["COPROF_PRELOAD_LIB"]
TESTBIN = os.environ["COPROF_TESTBIN"]
DROPPER = os.path.join(TESTBIN, "dropper")
NOBODY = 65534
TMP = tempfile.mkdtemp(prefix="coprof-creds-")
os.chmod(TMP, 0o755)  # root's: the workers, as nobody, cannot make files here


def need_root():
    check(os.geteuid() == 0, "these cases drop privileges: run them as root")


def preload_env(**extra):
    # Some of the programs here are CPython, which leaks at exit by design, and
    # LeakSanitizer cannot tell its leaks from ours.
    extra.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    env = base_env(**{k: str(v) for k, v in extra.items()})
    env["LD_PRELOAD"] = (ASAN + ":" + LIB) if ASAN else LIB
    return env


def fresh(name):
    d = os.path.join(TMP, name)
    shutil.rmtree(d, ignore_errors=True)
    os.mkdir(d, 0o755)
    return d


def run(cmd, env, timeout=120):
    p = subprocess.run(cmd, env=env, cwd=TMP, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=lambda: os.umask(0o022))
    check(p.returncode == 0, f"{cmd} exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def workers(stdout, n):
    """{worker index: pid} from dropper's "worker I PID uid U" lines (all as nobody)."""
    found = {}
    for m in re.finditer(r"^worker (\d+) (\d+) uid (\d+)$", stdout, re.M):
        check(int(m.group(3)) == NOBODY, f"worker {m.group(1)} runs as uid {m.group(3)}")
        found[int(m.group(1))] = int(m.group(2))
    check(sorted(found) == list(range(n)), f"workers said {stdout!r}")
    return found


def check_file(path, uid, own, others, min_ct=None):
    """path exists, is a regular file owned by uid (its group too), readable by all (the
    umask is 022), loads in pstats with coprof's extras, holds `own` and none of
    `others`; `own` holds at least min_ct seconds when given (CPU a worker burnt, under
    the cpu clock: whatever the load). Returns its Profile."""
    check(os.path.isfile(path), f"{path} was not written")
    st = os.lstat(path)
    check(stat.S_ISREG(st.st_mode), f"{path}: not a regular file")
    check(st.st_uid == uid and st.st_gid == uid, f"{path}: owned by {st.st_uid}:{st.st_gid}, expected {uid}")
    check(stat.S_IMODE(st.st_mode) == 0o644, f"{path}: mode {stat.S_IMODE(st.st_mode):o}")
    prof = Profile(path)
    check(prof.funcs(own), f"{path}: no {own} in {sorted(k[2] for k in prof.stats)}")
    for o in others:
        check(not prof.funcs(o), f"{path}: holds {o}, another process's work")
    if min_ct is not None:
        ct = max(v[3] for k, v in prof.funcs(own))
        check(ct >= min_ct, f"{path}: {own} ct {ct:.3f} s, expected at least {min_ct:.3f} s")
    return prof


def no_leftovers(d):
    tmp = [f for f in os.listdir(d) if ".tmp." in f]
    check(not tmp, f"temporary files left in {d}: {tmp}")


def keepers_gone(pids):
    """No coprof-keeper serves any of `pids` once they have exited."""
    def gone():
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(d + "/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"coprof-keeper") and len(argv) > 2 and \
                    argv[2].decode() in {str(p) for p in pids}:
                try:
                    with open(d + "/stat") as f:
                        if f.read().split(")")[-1].split()[0] != "Z":
                            return False
                except OSError:
                    pass
        return True
    wait_for(gone, 10, "the keepers to end with their processes")


WORKS = ["work_0", "work_1", "work_2", "work_3"]


def dropped(mode, how="setuid", ms=200):
    need_root()
    d = fresh(f"{mode}-{how}")
    tmpl = os.path.join(d, "w.%p.pstat")
    p = run(DROPPER_CMD(4, ms, how), preload_env(COPROF_OUT=tmpl, COPROF_MODE=mode, COPROF_HZ=997))
    check("coprof:" not in p.stderr, f"the shim complained: {p.stderr}")
    pids = workers(p.stdout, 4)
    files = sorted(glob.glob(os.path.join(d, "w.*.pstat")))
    check(len(files) == 5, f"expected 5 files (master, 4 workers): {files}")
    min_ct = 0.5 * ms / 1000 if mode == "trace" else None
    for i, pid in pids.items():
        prof = check_file(tmpl.replace("%p", str(pid)), NOBODY, WORKS[i],
                          [w for w in WORKS if w != WORKS[i]] + ["master_work"], min_ct)
        check(prof.extras["pid"] == pid, f"worker {i}'s file says pid {prof.extras['pid']}")
    master = [f for f in files if int(f.split(".")[-2]) not in pids.values()]
    check(len(master) == 1, f"master's file among {files}")
    check_file(master[0], 0, "master_work", WORKS)
    no_leftovers(d)
    keepers_gone(pids.values())


def DROPPER_CMD(n, ms, how="setuid"):
    return [DROPPER, str(n), str(ms), str(NOBODY), how]


def case_trace():
    """Four workers, setgroups/setgid/setuid, trace mode: five files, each its own."""
    dropped("trace")


def case_sample():
    """The same in sample mode (997 Hz): the sampled functions name each worker's work."""
    dropped("sample")


def case_setres():
    """setresgid/setresuid instead of setgid/setuid, trace mode."""
    dropped("trace", "setres")


def case_windows():
    """COPROF_INTERVAL windows numbered with %n from workers that dropped privileges:
    every window file is the keeper's, owned by nobody, and COPROF_KEEP removes the
    older ones through it too."""
    need_root()
    d = fresh("windows")
    tmpl = os.path.join(d, "w.%p.%n.pstat")
    # sample mode: a trace window holds only the calls made in it, and under load a
    # 0.2 s window may see none of work_N's 10 ms calls begin; every sample's stack
    # holds work_N
    p = run(DROPPER_CMD(2, 1200), preload_env(COPROF_OUT=tmpl, COPROF_INTERVAL="0.2", COPROF_KEEP=3,
                                              COPROF_MODE="sample", COPROF_HZ=997))
    check("coprof:" not in p.stderr, f"the shim complained: {p.stderr}")
    pids = workers(p.stdout, 2)
    for i, pid in pids.items():
        mine = glob.glob(os.path.join(d, f"w.{pid}.*.pstat"))
        nums = sorted(int(f.split(".")[-2]) for f in mine)
        # 1.2 s of CPU in 0.2 s windows, plus the exit's: at least 5 numbered windows
        check(len(nums) == 3 and nums[-1] >= 5, f"worker {i}: windows {nums} (keep 3 of >= 5)")
        check(nums == list(range(nums[0], nums[0] + 3)), f"worker {i}: not the newest 3: {nums}")
        for n in nums[:-1]:  # the last may be the exit's short remainder
            check_file(tmpl.replace("%p", str(pid)).replace("%n", str(n)), NOBODY, WORKS[i],
                       [w for w in WORKS if w != WORKS[i]])
    no_leftovers(d)


def case_toggled():
    """Windows toggled by `coprof toggle` after the drop (COPROF_START=0): each
    worker's two windows are written, numbered 1 and 2, and hold its work."""
    need_root()
    d = fresh("toggled")
    tmpl = os.path.join(d, "t.%p.%n.pstat")
    proc = subprocess.Popen(DROPPER_CMD(2, -1), env=preload_env(COPROF_OUT=tmpl, COPROF_START=0),
                            cwd=TMP, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.umask(0o022))
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        pids = workers("".join(lines), 2)
        for pid in pids.values():
            wait_for(lambda: catches(pid, signal.SIGUSR2), 20, "the toggle handler")
        for n in (1, 2):
            for pid in pids.values():
                toggle(pid)
            time.sleep(0.3)
            for pid in pids.values():
                out = toggle(pid)
                path = tmpl.replace("%p", str(pid)).replace("%n", str(n))
                check("wrote" in out, f"toggle off: {out!r}")
                wait_for(lambda: os.path.exists(path), 20, path)
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(timeout=60)
        check(proc.returncode == 0, f"dropper exited {proc.returncode}: {err}")
        check("coprof:" not in err, f"the shim complained: {err}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for i, pid in pids.items():
        for n in (1, 2):
            check_file(tmpl.replace("%p", str(pid)).replace("%n", str(n)), NOBODY, WORKS[i],
                       [w for w in WORKS if w != WORKS[i]])
    no_leftovers(d)


def case_never_writable():
    """A directory the process could never write (it starts as nobody, under setpriv,
    itself preloaded): one line per process naming the path and the OS's reason, the
    program runs on unchanged, and nothing is left in the directory."""
    need_root()
    d = fresh("never")
    tmpl = os.path.join(d, "n.%p.pstat")
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + DROPPER_CMD(2, 50)
    bare = subprocess.run(cmd, cwd=TMP, capture_output=True, text=True, timeout=60, env=base_env())
    p = run(cmd, preload_env(COPROF_OUT=tmpl))
    check(p.stdout.count("\n") == bare.stdout.count("\n"), f"output changed: {p.stdout!r} vs {bare.stdout!r}")
    pids = workers(p.stdout, 2)
    lines = [l for l in p.stderr.splitlines() if l.startswith("coprof:")]
    check(len(lines) == 3, f"expected one line for each of 3 processes: {lines}")
    for l in lines:
        m = re.match(r"coprof: cannot write the profile to (\S+): Permission denied$", l)
        check(m and os.path.dirname(m.group(1)) == d, f"unclear line: {l!r}")
    said = {int(l.split(" to ")[1].split(".")[-2]) for l in lines}
    check(set(pids.values()) <= said, f"workers {pids} not all named in {lines}")
    check(os.listdir(d) == [], f"files left in {d}: {os.listdir(d)}")


def case_seccomp():
    """Workers under a seccomp filter that kills the process at execve (a sandbox): the
    shim starts no keeper there, says so once, and the worker runs on (its file is then
    lost, said with the path and the reason)."""
    need_root()
    d = fresh("seccomp")
    tmpl = os.path.join(d, "s.%p.pstat")
    p = run(DROPPER_CMD(2, 50, "seccomp"), preload_env(COPROF_OUT=tmpl))
    pids = workers(p.stdout, 2)
    lines = [l for l in p.stderr.splitlines() if l.startswith("coprof:")]
    for pid in pids.values():
        path = tmpl.replace("%p", str(pid))
        check(f"coprof: cannot write the profile to {path}: Permission denied" in lines, f"{lines}")
    keeper = [l for l in lines if l == "coprof: cannot start coprof-keeper (the process runs under a "
              "seccomp filter, which may not allow it); a profile this process can no longer write "
              "after changing its credentials is lost"]
    check(len(keeper) == 2, f"expected one seccomp line per worker: {lines}")
    check(len(lines) == 4, f"lines: {lines}")


def case_setpriv():
    """setpriv sets PR_SET_KEEPCAPS and capabilities in its one thread, then calls
    setresuid and setresgid, which glibc runs on every thread and aborts on if they
    disagree: with the shim's threads alive (control, sampler), it must still work."""
    need_root()
    d = fresh("setpriv")
    for mode in ("trace", "sample"):
        for extra in ([], ["--inh-caps=-all"]):
            cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] + extra + ["id", "-u"]
            p = subprocess.run(cmd, env=preload_env(COPROF_OUT=os.path.join(d, "s.pstat"), COPROF_MODE=mode,
                                                    COPROF_INTERVAL="1"),
                               cwd=TMP, capture_output=True, text=True, timeout=60)
            check(p.returncode == 0 and p.stdout.strip() == str(NOBODY),
                  f"{mode} {cmd}: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
            check("coprof:" not in p.stderr, f"the shim complained: {p.stderr}")


def case_symlink():
    """A symbolic link where a dropped process's file goes: the keeper, which has rights
    the process has not, does not write through it. One line says so, with the path;
    the link and the file it names are left as they were."""
    need_root()
    d = fresh("symlink")
    victim = os.path.join(d, "victim")
    with open(victim, "w") as f:
        f.write("root's file\n")
    link = os.path.join(d, "p.pstat")
    os.symlink(victim, link)
    prog = f"import os; os.setgid({NOBODY}); os.setuid({NOBODY}); sum(range(300000)); print('done')"
    p = run(["/usr/bin/python3", "-c", prog], preload_env(COPROF_OUT=link))
    check(p.stdout == "done\n", f"stdout {p.stdout!r}")
    lines = [l for l in p.stderr.splitlines() if l.startswith("coprof:")]
    check(lines == [f"coprof: cannot write the profile to {link}: it is a symbolic link, and a "
                    "process that dropped its privileges writes through none; nothing was written"],
          f"stderr: {p.stderr!r}")
    check(os.path.islink(link) and os.readlink(link) == victim, "the link was replaced")
    with open(victim) as f:
        check(f.read() == "root's file\n", "the file the link names was written")
    no_leftovers(d)


def case_exec():
    """A process that dropped its privileges and then execs (setpriv running a shell):
    the keeper goes before the exec, so the new image finds no child of coprof's (one
    it never made, which would end, or be a zombie, under it)."""
    need_root()
    d = fresh("exec")
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sh", "-c",
           'read c < /proc/$$/task/$$/children; echo "children:$c"']
    p = run(cmd, preload_env(COPROF_OUT=os.path.join(d, "e.%p.pstat"), COPROF_MODE="sample"))
    check(p.stdout == "children:\n", f"the shell after exec has children: {p.stdout!r}")


REAPER = os.path.join(TESTBIN, "reaper")
NO_KEEPER = ("coprof: cannot start coprof-keeper (it would become a child of {}, which takes orphaned "
             "processes: a child subreaper, or pid 1 of its pid namespace); a profile this process can no "
             "longer write after changing its credentials is lost")
NO_KEEPER_SELF = NO_KEEPER.format("this process")
NO_KEEPER_PARENT = NO_KEEPER.format("the process this one was forked from")


def case_subreaper():
    """A process that takes orphans (a child subreaper, or pid 1 of a pid namespace) and
    waits for all its children, with privileges dropped (tests/native/reaper.c): a
    keeper would be re-parented to it when its go-between leaves, so that its wait()
    would wait for the keeper until the program exits. It ends at once, exit 0, reaping
    only its worker, as unprofiled; no keeper starts where it would be the program's
    child (said once), and the files that then cannot be written are said lost. A
    subreaper set after the keeper started leaves the keeper where it was (not its
    child): the file is written."""
    need_root()
    cmds = {"self": [REAPER, "self", str(NOBODY)], "late": [REAPER, "late", str(NOBODY)],
            "child": [REAPER, "child", str(NOBODY)]}
    # --kill-child: a reaper that hangs goes with unshare when the timeout kills it
    if subprocess.run(["unshare", "--pid", "--fork", "--kill-child", "true"], capture_output=True).returncode == 0:
        cmds["pid1"] = ["unshare", "--pid", "--fork", "--kill-child", REAPER, "plain", str(NOBODY)]
    else:
        print("creds-subreaper: unshare --pid fails here; pid 1 of a pid namespace is not checked")
    # LeakSanitizer cannot stop a process's threads from inside a new pid namespace (it
    # reads the parent's /proc): a sanitizer build's pid 1 runs without it, profiled or not.
    no_lsan = lambda how, env: dict(env, ASAN_OPTIONS=env.get("ASAN_OPTIONS", "") + ":detect_leaks=0") \
        if how == "pid1" else env
    for how, cmd in cmds.items():
        bare = subprocess.run(cmd, cwd=TMP, capture_output=True, text=True, timeout=20, env=no_lsan(how, base_env()))
        check(bare.returncode == 0 and bare.stderr == "", f"{how}: unprofiled: {bare}")
        d = fresh("reaper-" + how)
        tmpl = os.path.join(d, "r.%p.pstat")
        try:
            p = subprocess.run(cmd, env=no_lsan(how, preload_env(COPROF_OUT=tmpl)), cwd=TMP, capture_output=True, text=True,
                               timeout=20, preexec_fn=lambda: os.umask(0o022))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{how}: hung in its wait() loop (20 s)")
        check(p.returncode == 0, f"{how}: exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
        m = re.fullmatch(r"worker (\d+)\nreaped \1\nno children left\n", p.stdout)
        check(m, f"{how}: output {p.stdout!r} (unprofiled: {bare.stdout!r})")
        worker = int(m.group(1))
        lost = lambda pid: f"coprof: cannot write the profile to {tmpl.replace('%p', str(pid))}: Permission denied"
        lines = sorted(p.stderr.splitlines())
        files = sorted(os.listdir(d))
        if how == "late":  # the reaper's keeper started before it took orphans
            reaper = int(files[0].split(".")[1]) if len(files) == 1 else 0
            check(files == [f"r.{reaper}.pstat"], f"{how}: files {files}")
            check_file(os.path.join(d, files[0]), NOBODY, "reaper_work", ["worker_work"])
            check(lines == [lost(worker)], f"{how}: stderr {p.stderr!r}")
        elif how == "child":  # the reaper stays root; its worker drops
            reaper = int(files[0].split(".")[1]) if len(files) == 1 else 0
            check(files == [f"r.{reaper}.pstat"], f"{how}: files {files}")
            check_file(os.path.join(d, files[0]), 0, "reaper_work", ["worker_work"])
            check(lines == sorted([NO_KEEPER_PARENT, lost(worker)]), f"{how}: stderr {p.stderr!r}")
        else:  # self, pid1: the reaper drops
            check(files == [], f"{how}: files {files}")
            named = {int(x) for x in re.findall(r"r\.(\d+)\.pstat", p.stderr)} - {worker}
            reaper = named.pop() if len(named) == 1 else 0
            check(how != "pid1" or reaper == 1, f"{how}: the reaper is not pid 1: {p.stderr!r}")
            check(lines == sorted([NO_KEEPER_SELF, lost(worker), lost(reaper)]), f"{how}: stderr {p.stderr!r}")
        no_leftovers(d)


# Functions of nginx's request path (its dynamic symbols): a sample in a request has
# some of them on its stack.
NGX_REQUEST = {"ngx_http_wait_request_handler", "ngx_http_init_connection", "ngx_http_create_request",
               "ngx_http_process_request_line", "ngx_http_process_request_headers",
               "ngx_http_process_request", "ngx_http_handler", "ngx_http_core_run_phases",
               "ngx_http_finalize_request", "ngx_http_send_response", "ngx_http_output_filter",
               "ngx_http_write_filter", "ngx_http_close_connection"}


def case_nginx():
    """Debian's nginx, a master and two workers (user nobody), sampled under ab: each
    worker's file is written by the keeper, owned by nobody, and holds worker work (its
    event loop, and for one at least the requests: NGX_REQUEST); the master's holds
    none (it parses the configuration with ngx_http_* functions, serves nothing)."""
    need_root()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    ab = shutil.which("ab")
    check(os.access(nginx, os.X_OK) and ab, "nginx and ab are needed (scripts/setup.sh installs them)")
    d = fresh("nginx")
    run_dir = os.path.join(d, "run")
    os.mkdir(run_dir, 0o755)
    out = os.path.join(d, "prof")
    os.mkdir(out, 0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = os.path.join(run_dir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process on;
worker_processes 2;
user nobody nogroup;
pid {run_dir}/nginx.pid;
error_log {run_dir}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {run_dir}/body;
    proxy_temp_path {run_dir}/proxy;
    fastcgi_temp_path {run_dir}/fastcgi;
    uwsgi_temp_path {run_dir}/uwsgi;
    scgi_temp_path {run_dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "hello from nginx\\n"; }}
    }}
}}
""")
    tmpl = os.path.join(out, "n.%p.pstat")
    # nginx has handlers of its own for USR1 and USR2: no toggle signal. At 4,999 Hz, not
    # 997: the master takes 1.5-5 ms of CPU in all, 1-3 ticks at 997 Hz, and a master
    # whose window recorded nothing writes no file (the man page's rule): 7 runs in 30
    # found none
    proc = subprocess.Popen([BIN, "record", "--mode", "sample", "--hz", "4999", "--signal", "none",
                             "-o", tmpl, "--",
                             nginx, "-c", conf, "-p", run_dir], env=base_env(), cwd=TMP,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: os.umask(0o022))
    workers_ = []
    try:
        def kids():
            """The nginx processes under `coprof record` that run as nobody."""
            found, todo = [], [proc.pid]
            while todo:
                p_ = todo.pop()
                try:
                    with open(f"/proc/{p_}/task/{p_}/children") as f:
                        todo += [int(x) for x in f.read().split()]
                    with open(f"/proc/{p_}/comm") as f:
                        comm = f.read().strip()
                    if comm == "nginx" and os.stat(f"/proc/{p_}").st_uid == NOBODY:
                        found.append(p_)
                except OSError:
                    pass
            return found
        wait_for(lambda: len(kids()) == 2, 30, "two nginx workers running as nobody")
        workers_ = kids()  # the test's own (its nginx's): killed below if anything fails
        a = subprocess.run([ab, "-q", "-n", "20000", "-c", "8", f"http://127.0.0.1:{port}/"],
                           capture_output=True, text=True, timeout=120)
        check(a.returncode == 0 and "Complete requests:      20000" in a.stdout
              and "Failed requests:        0" in a.stdout, f"ab: {a.stdout[-800:]} {a.stderr}")
        proc.send_signal(signal.SIGQUIT)  # graceful: workers finish and exit(3)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            for w in workers_:  # a killed master leaves its workers running
                try:
                    with open(f"/proc/{w}/comm") as f:
                        still = f.read().strip() == "nginx" and os.stat(f"/proc/{w}").st_uid == NOBODY
                    if still:
                        os.kill(w, signal.SIGKILL)
                except OSError:
                    pass
    check("coprof:" not in err, f"the shim complained: {err}")
    worker_files = [os.path.join(out, f"n.{w}.pstat") for w in workers_]
    served = 0
    for path in worker_files:
        # ngx_worker_process_cycle is static (Debian's nginx keeps only its dynamic
        # symbols); the event loop it runs is not
        prof = check_file(path, NOBODY, "ngx_process_events_and_timers", [])
        check(prof.extras["mode"] == "sample", f"{path}: mode {prof.extras['mode']}")
        if {k[2] for k in prof.stats} & NGX_REQUEST:
            served += 1
    check(served >= 1, "no worker file holds request work (ngx_http_process_request...)")
    master = glob.glob(os.path.join(out, "n.*.pstat"))
    master = [f for f in master if f not in worker_files]
    check(len(master) == 1, f"the master's file among {os.listdir(out)}")
    request = {k[2] for k in check_file(master[0], 0, "ngx_master_process_cycle", []).stats} & NGX_REQUEST
    check(not request, f"the master's file holds request work: {sorted(request)}")
    no_leftovers(out)


run_cases(globals())
