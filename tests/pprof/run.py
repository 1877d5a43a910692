"""tests/pprof/run.py CASE: `coprof export --format pprof` read back by Go's own reader,
`go tool pprof` (Debian's golang-go): its -top totals and per-function flat/cum times
equal `coprof report`'s, its -traces stacks and labels equal `export --format
collapsed`'s, and traced files give caller;callee pairs with a note, labelled by task
(each task's pieces are its own table, the [thread] ones the rest), and stalls as
samples of their own types (traced-tasks on the engine's file, stalls-exact on
make-profile's). A missing `go` fails the test. The windows-* cases check periodic windows (COPROF_INTERVAL,
COPROF_KEEP): back to back, numbered, ended by a stop toggle, pruned, and a directory
that cannot take them. Runs real programs under `coprof record`; files go to a temp
dir."""
import collections
import json
import marshal
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import ASAN, base_env, catches, check, load, run_cases, toggle, wait_for  # noqa: E402

BIN = os.environ["COPROF_BIN"]
CPU = os.environ["COPROF_CPU_SAMPLES"]
NATIVE = os.environ["COPROF_SAMPLES"]
GOHOME = os.environ["COPROF_GOHOME"]
MAKE_PROFILE = os.environ["COPROF_MAKE_PROFILE"]
TMP = tempfile.mkdtemp(prefix="coprof-pprof-")


def go():
    g = shutil.which("go") or next((p for p in ("/usr/lib/go/bin/go", "/usr/bin/go")
                                    if os.path.exists(p)), None)
    check(g is not None, "no `go` found: the pprof tests need golang-go (scripts/setup.sh)")
    return g


def pprof(args, path):
    """`go tool pprof ARGS PATH`'s stdout, with HOME and GOCACHE in the build dir."""
    os.makedirs(os.path.join(GOHOME, "cache"), exist_ok=True)
    env = dict(base_env(), HOME=GOHOME, GOCACHE=os.path.join(GOHOME, "cache"),
               PPROF_TMPDIR=GOHOME, GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    p = subprocess.run([go(), "tool", "pprof"] + args + [path], env=env, capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, f"go tool pprof {' '.join(args)} {path}: exit {p.returncode}\n"
          f"{p.stderr}")
    return p.stdout


def coprof(*args, ok=True):
    p = subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=120)
    if ok:
        check(p.returncode == 0, f"coprof {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return p


def record(name, opts, cmd, env=None):
    out = os.path.join(TMP, name)
    p = subprocess.run([BIN, "record"] + opts + ["-o", out, "--"] + cmd, env=env or base_env(),
                       cwd=TMP, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    return out


def export(paths, name):
    out = os.path.join(TMP, name)
    p = coprof("export", *paths, "--format", "pprof", "-o", out)
    with open(out, "rb") as f:
        check(f.read(2) == b"\x1f\x8b", f"{out} is not gzip")
    return out, p.stderr


def report(paths):
    return json.loads(coprof("report", *paths, "--format", "json", "--limit", "0").stdout)


NS = re.compile(r"^(-?[0-9.]+)(ns)?$")


def ns(tok):
    m = NS.match(tok)
    check(m is not None, f"expected a value in ns, found {tok!r}")
    return float(m.group(1))


def top(path):
    """(total ns, {name: [flat ns, cum ns]}) from `pprof -top` with nothing dropped."""
    out = pprof(["-top", "-unit=ns", "-nodecount=1000000", "-nodefraction=0",
                 "-edgefraction=0"], path)
    m = re.search(r"of (\S+) total", out)
    check(m is not None, f"no total in pprof -top:\n{out}")
    total = ns(m.group(1))
    rows, seen = {}, collections.Counter()
    body = out.split("flat  flat%   sum%        cum   cum%", 1)
    check(len(body) == 2, f"no table in pprof -top:\n{out}")
    for line in body[1].splitlines():
        f = line.split(None, 5)
        if len(f) < 6:
            continue
        seen[f[5]] += 1
        rows[f[5]] = [ns(f[0]), ns(f[3])]
    return total, {k: v for k, v in rows.items() if seen[k] == 1}


def traces(path, index):
    """pprof -traces as a list of (labels {key: value}, frames innermost first, value)."""
    out = pprof(["-traces", "-unit=ns", f"-sample_index={index}"], path)
    blocks = out.split("-----------+-------------------------------------------------------")
    res = []
    for b in blocks[1:]:
        labels, frames, value = {}, [], None
        if not b.strip():
            continue
        for line in b.splitlines():
            if not line.strip():
                continue
            lm = re.match(r"^\s*([A-Za-z_]+):  (.*)$", line)
            if value is None and lm:
                labels[lm.group(1)] = lm.group(2).strip()
            elif value is None:
                tok, _, rest = line.strip().partition(" ")
                value = ns(tok)
                frames.append(rest.strip())
            else:
                frames.append(line.strip())
        check(value is not None and frames, f"unreadable trace block:\n{b}")
        res.append((labels, frames, value))
    check(res, f"pprof -traces printed no samples:\n{out}")
    return res


RAW_LABEL = re.compile(r"(\w+):\[(.*?)\](?=\s|$)")


def raw(path):
    """`pprof -raw`: (sample types [(type, unit)], [(values, frames innermost first,
    {label: value})]). A number label's value keeps its unit ("30000000 nanoseconds")."""
    out = pprof(["-raw"], path)
    head, _, rest = out.partition("\nSamples:\n")
    check(rest, f"no samples in pprof -raw:\n{out[:600]}")
    body, _, locs = rest.partition("\nLocations\n")
    names = {}
    for line in locs.splitlines():
        m = re.match(r"^\s*(\d+): 0x[0-9a-f]+ M=\d+ (\S+)", line)
        if m:
            names[m.group(1)] = m.group(2)
    lines = body.splitlines()
    types = [tuple(t.replace("[dflt]", "").split("/")) for t in lines[0].split()]
    samples = []
    for line in lines[1:]:
        if ":" in line and re.match(r"^\s*-?\d+(\s+-?\d+)*:", line):
            vals, _, ids = line.partition(":")
            samples.append(([int(v) for v in vals.split()], [names[i] for i in ids.split()], {}))
        elif line.strip() and samples:
            for k, v in RAW_LABEL.findall(line):
                samples[-1][2][k] = v
    return types, samples


def folded_name(s):
    return s.replace(";", "_").replace("\n", "_")


def check_top(paths, pb):
    """-top's total, and each function's flat and cum, equal report's tsub and ttot
    (ns; report prints 9 significant digits)."""
    rep = report(paths)
    total, rows = top(pb)
    want = rep["total_tt"] * 1e9
    check(abs(total - want) <= 1e-7 * want + 1000,
          f"pprof total {total:.0f} ns, report {want:.0f} ns")
    names = collections.Counter(f["name"] for f in rep["functions"])
    checked = 0
    for f in rep["functions"]:
        if names[f["name"]] != 1 or f["ttot"] == 0:
            continue
        check(f["name"] in rows, f"{f['name']} (ttot {f['ttot']}) missing from pprof -top")
        flat, cum = rows[f["name"]]
        for what, got, exp in (("flat", flat, f["tsub"] * 1e9), ("cum", cum, f["ttot"] * 1e9)):
            check(abs(got - exp) <= 1e-7 * exp + 1000,
                  f"{f['name']}: pprof {what} {got:.0f} ns, report {exp:.0f} ns")
        checked += 1
    check(checked >= 3, f"only {checked} functions compared")
    return rep


def check_stacks(paths, pb):
    """-traces (by samples) equal `export --format collapsed`: the same stacks, each
    with the same thread, task and waiting, the same counts. Every sample carries the
    labels thread and task. Returns the traces."""
    tr = traces(pb, "samples")
    got = collections.Counter()
    for labels, frames, value in tr:
        check("thread" in labels and "task" in labels, f"labels {labels} lack thread/task")
        task = labels["task"]
        if task != "[thread]":
            tid = labels.get("task_id")
            check(tid is not None, f"task label without task_id: {labels}")
            name = "" if task == f"task {tid}" else " " + task
            task = f"[task {tid}{name}]"
        key = [f"[tid {labels['thread']}]", folded_name(task)]
        key += [folded_name(f) for f in reversed(frames)]
        if labels.get("waiting") == "true":
            key.append("[waiting]")
        got[";".join(key)] += int(value)
    want = collections.Counter()
    for line in coprof("export", *paths, "--format", "collapsed", "-o", "-").stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        want[stack] += int(n)
    check(got == want, "pprof -traces and collapsed differ:\n only in pprof: "
          f"{dict(got - want)}\n only in collapsed: {dict(want - got)}")
    check(len(want) >= 2, f"only {len(want)} stacks")
    return tr


def sampled(name, opts, cmd):
    path = record(name + ".pstat", ["--mode", "sample"] + opts, cmd)
    pb, err = export([path], name + ".pb.gz")
    check(err == "", f"export of a sampled file said: {err}")
    return path, pb


def case_sampled_cpu():
    """Three threads of cpu-split under the CPU clock: per-thread labels."""
    path, pb = sampled("cpu", ["-c", "cpu", "--hz", "997"],
                       [os.path.join(CPU, "cpu-split"), "1", "3"])
    check_top([path], pb)
    tr = check_stacks([path], pb)
    check(len({lab["thread"] for lab, _, _ in tr}) == 3, "expected 3 thread labels")
    out = pprof(["-top", "-sample_index=cpu"], pb)
    check("Type: cpu" in out, f"sample type cpu missing:\n{out[:400]}")
    raw = pprof(["-raw"], pb)
    check("PeriodType: cpu nanoseconds" in raw and "Period: 1003009" in raw,
          f"period type/period (997 Hz) missing:\n{raw[:600]}")
    check(re.search(r"Duration: [1-9]", raw) is not None, f"no duration:\n{raw[:600]}")
    # file names and start lines of the functions (cpu-split has debug info)
    lst = pprof(["-list", "^heavy$"], pb)
    check("split.c" in lst, f"heavy's file not in pprof -list:\n{lst[:600]}")
    check(re.search(r"heavy .*split\.c:\d+", pprof(["-traces", "-lines"], pb)) or
          re.search(r"split\.c:[1-9]\d*", pprof(["-top", "-lines"], pb)),
          "no split.c line numbers")


def case_sampled_wall():
    """sched's coroutines under the wall clock: task labels, waiting stacks."""
    path, pb = sampled("wall", ["-c", "wall", "--hz", "1999"], [os.path.join(NATIVE, "sched")])
    check_top([path], pb)
    tr = check_stacks([path], pb)
    tasks = {lab["task"] for lab, _, _ in tr}
    check({"crunch", "sleeper", "[thread]"} <= tasks, f"task labels {tasks}")
    check(any(lab.get("waiting") == "true" for lab, _, _ in tr), "no waiting sample")
    check("Type: wall" in pprof(["-top"], pb), "sample type wall missing")
    # a fleet store filters by coroutine: -tagfocus keeps one task's samples
    only = pprof(["-top", "-unit=ns", "-tagfocus=task=sleeper", "-nodefraction=0"], pb)
    check("burn_cpu" in only and "crunch_work" not in only,
          f"-tagfocus=task=sleeper did not select the sleeper task:\n{only}")


def case_merged():
    """Two sampled files export as `report` merges them."""
    a = record("m1.pstat", ["--mode", "sample", "-c", "cpu"], [os.path.join(CPU, "cpu-split"), "0.5"])
    b = record("m2.pstat", ["--mode", "sample", "-c", "cpu"], [os.path.join(CPU, "cpu-split"), "0.5", "2"])
    pb, err = export([a, b], "merged.pb.gz")
    check(err == "", f"export said: {err}")
    check_top([a, b], pb)
    tr = check_stacks([a, b], pb)
    check(len({lab["thread"] for lab, _, _ in tr}) == 3, "expected 3 threads over 2 files")


def case_old_file():
    """A file from before per-stack times: own times are split by sample count, with a
    note; totals and flat times still equal report's."""
    path = record("old.pstat", ["--mode", "sample", "-c", "cpu"], [os.path.join(CPU, "cpu-split"), "1"])
    with open(path, "rb") as f:
        stats, extras = marshal.load(f), marshal.load(f)
    check("stack_ns" in extras, "the engine wrote no stack_ns")
    del extras["stack_ns"]
    old = os.path.join(TMP, "old-stripped.pstat")
    with open(old, "wb") as f:
        marshal.dump(stats, f)
        marshal.dump(extras, f)
    pb, err = export([old], "old.pb.gz")
    check("no per-stack times" in err, f"no note on stderr: {err!r}")
    rep = report([old])
    total, rows = top(pb)
    check(abs(total - rep["total_tt"] * 1e9) <= 1e-7 * total + 1000, "total differs")
    for f in rep["functions"]:
        if f["tsub"] > 0:
            check(abs(rows[f["name"]][0] - f["tsub"] * 1e9) <= 1e-7 * total + 1000,
                  f"{f['name']}: flat {rows[f['name']][0]} vs tsub {f['tsub']}")
    check_stacks([old], pb)


def check_edges(paths, pb, err):
    """A traced profile: note on stderr and in the comments; flat times equal tsub and
    the total equals report's; each --from-edges pair is a two-frame trace with the
    same own time (us)."""
    check("not stacks" in err, f"no note on stderr: {err!r}")
    check("traced profile: samples are caller;callee pairs" in pprof(["-comments"], pb),
          "no note in the profile's comments")
    check("Type: calls" in pprof(["-top", "-sample_index=calls"], pb), "no calls type")
    rep = report(paths)
    total, rows = top(pb)
    want = rep["total_tt"] * 1e9
    check(abs(total - want) <= 1e-7 * want + 1000 + len(rows), f"total {total} vs {want}")
    names = collections.Counter(f["name"] for f in rep["functions"])
    for f in rep["functions"]:
        if names[f["name"]] == 1 and f["tsub"] * 1e9 >= 1000:
            check(abs(rows[f["name"]][0] - f["tsub"] * 1e9) <= 1e-7 * want + 1000,
                  f"{f['name']}: flat {rows[f['name']][0]} vs tsub {f['tsub']}")
    got = collections.Counter()
    for labels, frames, value in traces(pb, "1"):
        if labels.get("stall") == "true":
            continue  # a stall's sample has the stall's whole stack
        check(len(frames) <= 2, f"a traced export has a {len(frames)}-frame stack")
        key = [folded_name(x) for x in reversed(frames)]
        if "task" in labels:  # a coprof file: --from-edges starts with the task's frame
            task = labels["task"]
            if task != "[thread]":
                tid = labels["task_id"]
                task = f"[task {tid}{'' if task == f'task {tid}' else ' ' + task}]"
            key.insert(0, folded_name(task))
        got[";".join(key)] += value
    edges = coprof("export", *paths, "--format", "collapsed", "--from-edges", "-o", "-").stdout
    n = 0
    for line in edges.splitlines():
        stack, _, us = line.rpartition(" ")
        check(stack in got and int(got[stack] // 1000) == int(us),
              f"--from-edges {line!r}: pprof has {got.get(stack)} ns")
        n += 1
    check(n >= 3, f"only {n} edges")


def case_traced():
    path = record("traced.pstat", ["-c", "wall"], [os.path.join(NATIVE, "sched")])
    pb, err = export([path], "traced.pb.gz")
    check_edges([path], pb, err)


def ns_of(s):
    return round(s * 1e9)


def by_leaf(samples, value, pick):
    """{leaf function: summed values[value]} of the samples `pick(labels)` keeps."""
    out = collections.Counter()
    for vals, frames, labels in samples:
        if pick(labels):
            out[frames[0]] += vals[value]
    return +out


def case_traced_tasks():
    """A traced sched (wall, stalls from 10 ms): in pprof -raw each task's samples add
    up, function by function, to its own table in the file, to the ns and the call;
    the [thread] samples to the top level less the tasks; together to the table, so
    the totals are the table's. -tagfocus=task=... picks a task's functions. Each
    stall is one sample, of the stall types only, labelled with its task and length
    on its stack; collapsed --stalls and --from-edges say the same."""
    env = base_env(COPROF_STALL_MS="10")
    path = record("tasks.pstat", ["-c", "wall"], [os.path.join(NATIVE, "sched")], env)
    stats, extras = load(path)
    pb, err = export([path], "tasks.pb.gz")
    check_edges([path], pb, err)
    types, samples = raw(pb)
    check(types == [("calls", "count"), ("wall", "nanoseconds"), ("stalls", "count"),
                    ("stall_time", "nanoseconds")], f"sample types {types}")
    plain = [x for x in samples if x[2].get("stall") != "true"]
    stalls = [x for x in samples if x[2].get("stall") == "true"]
    check(len(extras["threads"]) == 1, "sched runs one thread")
    tid = str(extras["threads"][0]["tid"])
    for vals, frames, labels in plain:
        check(vals[2:] == [0, 0], f"a time sample with stall values {vals}")
        check(labels.get("thread") == tid and "task" in labels, f"labels {labels}")
        check(1 <= len(frames) <= 2, f"frames {frames}")
    tasks = extras["tasks"]
    check(len(tasks) == 3, f"{len(tasks)} tasks")
    rest_ns, rest_nc = collections.Counter(), collections.Counter()
    for k, v in stats.items():
        rest_ns[k[2]] += ns_of(v[2])
        rest_nc[k[2]] += v[1]
    for t in tasks:
        mine = lambda lab, t=t: lab.get("task_id") == str(t["id"])  # noqa: E731
        want_ns = +collections.Counter({k[2]: ns_of(v[2]) for k, v in t["stats"].items()})
        want_nc = +collections.Counter({k[2]: v[1] for k, v in t["stats"].items()})
        got = by_leaf(plain, 1, mine)
        check(got == want_ns, f"task {t['id']}: pprof {dict(got)} vs its table {dict(want_ns)}")
        check(by_leaf(plain, 0, mine) == want_nc, f"task {t['id']}: calls differ")
        check({lab["task"] for _, _, lab in plain if mine(lab)} == {t["name"]}, "task label")
        rest_ns.subtract(want_ns)
        rest_nc.subtract(want_nc)
    thread = lambda lab: lab["task"] == "[thread]"  # noqa: E731
    check(by_leaf(plain, 1, thread) == +rest_ns and by_leaf(plain, 0, thread) == +rest_nc,
          f"[thread]: pprof {dict(by_leaf(plain, 1, thread))} vs the rest {dict(+rest_ns)}")
    total = sum(vals[1] for vals, _, _ in plain)
    check(total == sum(ns_of(v[2]) for v in stats.values()),
          f"pprof total {total} ns vs the table's {sum(ns_of(v[2]) for v in stats.values())}")
    only = pprof(["-top", "-tagfocus=task=sleeper", "-nodefraction=0"], pb)
    check("sleeper_work" in only and "crunch_work" not in only,
          f"-tagfocus=task=sleeper did not select the sleeper task:\n{only}")
    tags = pprof(["-tags"], pb)
    for t in ("crunch", "sleeper", "[thread]"):
        check(re.search(r"^\s+\S+ \(\s*[\d.]+%\): " + re.escape(t) + "$", tags, re.M),
              f"{t} not among -tags' task values:\n{tags}")

    # stalls: one sample each, as the file lists them
    want = collections.Counter()
    for th, task_id, name, sec, keys in (s[:5] for s in extras["stalls"]):
        want[(str(th), str(task_id), name, ns_of(sec), tuple(k[2] for k in keys))] += 1
    check(sum(want.values()) >= 10, f"only {sum(want.values())} stalls (two crunch tasks, "
          "10 steps of 20 ms each)")
    got = collections.Counter()
    for vals, frames, labels in stalls:
        check(vals[:3] == [0, 0, 1], f"a stall's values {vals}")
        check(labels["stall_length"] == f"{vals[3]} nanoseconds", f"stall labels {labels}")
        got[(labels["thread"], labels["task_id"], labels["task"], vals[3], tuple(frames))] += 1
    check(got == want, f"stall samples {dict(got)}\nvs the file's {dict(want)}")
    stall_ns = sum(k[3] * n for k, n in want.items())
    t, rows = top_index(pb, "stall_time")
    check(t == stall_ns, f"-sample_index=stall_time total {t} vs {stall_ns}")
    leaf = collections.Counter()
    for k, n in want.items():
        leaf[k[4][0]] += k[3] * n
    check({name: rows.get(name, [0])[0] for name in leaf} == leaf,
          f"-sample_index=stall_time flat {rows} vs the stalls' innermost frames {dict(leaf)}")
    # rule 11: the innermost call that held half the step, burn_cpu under crunch_work
    check(leaf["burn_cpu"] > 0, f"no stall at burn_cpu: {dict(leaf)}")
    folded = collections.Counter()
    for line in coprof("export", path, "--format", "collapsed", "--stalls", "-o", "-").stdout.splitlines():
        stack, _, us = line.rpartition(" ")
        folded[(stack, int(us))] += 1
    want_folded = collections.Counter()
    for (th, task_id, name, n, frames), k in want.items():
        key = ";".join([f"[tid {th}]", f"[task {task_id} {name}]"] + list(reversed(frames)))
        want_folded[(key, n // 1000)] += k
    check(folded == want_folded, f"--stalls {dict(folded)}\nvs {dict(want_folded)}")


def top_index(path, index):
    """(total ns, {name: [flat, cum]}) of -top on one sample type."""
    out = pprof(["-top", "-unit=ns", f"-sample_index={index}", "-nodecount=1000000",
                 "-nodefraction=0", "-edgefraction=0"], path)
    m = re.search(r"of (\S+) total", out)
    check(m is not None, f"no total in -top:\n{out}")
    rows = {}
    for line in out.split("cum   cum%", 1)[1].splitlines():
        f = line.split(None, 5)
        if len(f) == 6:
            rows[f[5]] = [ns(f[0]), ns(f[3])]
    return ns(m.group(1)), rows


def case_stalls_exact():
    """make-profile's file (the design's worked example, two stalls: task-a 30 ms at
    a_root;a_work, task-b 20 ms at b_root): the pieces of each task and the thread, and
    the stall samples, value for value; -tagfocus by stall length and -tags by stalls
    count. Its sampled twin has no stall types."""
    path = os.path.join(TMP, "mp.pstat")
    subprocess.run([MAKE_PROFILE, path], check=True, timeout=60)
    stats, extras = load(path)
    pb, _ = export([path], "mp.pb.gz")
    types, samples = raw(pb)
    check(len(types) == 4, f"types {types}")
    got = sorted((lab.get("task"), lab.get("task_id"), tuple(fr), tuple(v))
                 for v, fr, lab in samples if "stall" not in lab)
    ms = 1000000
    want = sorted([  # task-a's and task-b's tables, main in the rest
        ("task-a", "1", ("a_root",), (1, 10 * ms, 0, 0)),
        ("task-a", "1", ("a_work", "a_root"), (1, 30 * ms, 0, 0)),
        ("task-a", "1", ("a_yield", "a_root"), (1, 40 * ms, 0, 0)),
        ("task-b", "2", ("b_root",), (1, 0, 0, 0)),
        ("task-b", "2", ("b_work", "b_root"), (1, 20 * ms, 0, 0)),
        ("[thread]", None, ("main",), (1, 40 * ms, 0, 0)),
    ])
    check(got == want, f"pieces {got}")
    check(all(lab["thread"] == "4243" and lab["thread_name"] == "sched-main"
              for _, _, lab in samples), "thread labels")
    st = sorted((lab["task"], lab["task_id"], lab["stall_length"], lab.get("ready_behind"),
                 tuple(fr), tuple(v))
                for v, fr, lab in samples if lab.get("stall") == "true")
    check(st == [("task-a", "1", f"{30 * ms} nanoseconds", None, ("a_work", "a_root"),
                  (0, 0, 1, 30 * ms)),
                 ("task-b", "2", f"{20 * ms} nanoseconds", "3", ("b_root",), (0, 0, 1, 20 * ms))],
          f"stall samples {st}")
    long = traces_of(pprof(["-traces", "-sample_index=stall_time", "-tagfocus=stall_length=25ms:"], pb))
    check(long == [("task-a", ["a_work", "a_root"])], f"stalls of 25 ms or more: {long}")
    tags = pprof(["-tags", "-sample_index=stalls", "-tagfocus=stall=true"], pb)
    for t in ("task-a", "task-b"):
        check(re.search(r"^\s+1\.0 \(50\.00%\): " + t + "$", tags, re.M), f"-tags:\n{tags}")
    check("Type: wall" in pprof(["-top"], pb), "time is no longer the default type")
    check(pprof(["-comments"], pb).count("stalls: 2 steps of 20.000 ms") == 1, "comment")
    spath = os.path.join(TMP, "mps.pstat")
    subprocess.run([MAKE_PROFILE, spath, "--sample"], check=True, timeout=60)
    spb, _ = export([spath], "mps.pb.gz")
    check(raw(spb)[0] == [("samples", "count"), ("wall", "nanoseconds")],
          f"a file without stalls got types {raw(spb)[0]}")


def traces_of(out):
    """[(task label, frames)] of -traces' samples."""
    res = []
    for b in out.split("-----------+-------------------------------------------------------")[1:]:
        lab = re.search(r"^\s*task:  (.*)$", b, re.M)
        fr = [l.split()[-1] for l in b.splitlines()
              if l.strip() and not re.match(r"^\s*[A-Za-z_]+:  ", l)]
        if lab:
            res.append((lab.group(1).strip(), fr))
    return res


def case_cprofile():
    """A file cProfile wrote (no extras) exports like a traced one."""
    src = os.path.join(TMP, "prog.py")
    with open(src, "w") as f:
        f.write("def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
                "def work():\n    return sum(fib(18) for _ in range(5))\n"
                "def main():\n    work()\n    sorted(range(100000), key=lambda x: -x)\n"
                "main()\n")
    out = os.path.join(TMP, "cprof.pstat")
    subprocess.run([sys.executable, "-m", "cProfile", "-o", out, src], check=True, timeout=120)
    pb, err = export([out], "cprof.pb.gz")
    check_edges([out], pb, err)


def case_bad_input():
    """Mixed sampled and traced files, and an output that cannot be written: one line
    on stderr, status 2, no file."""
    s = record("bad-s.pstat", ["--mode", "sample"], [os.path.join(CPU, "cpu-split"), "0.3"])
    t = record("bad-t.pstat", [], [os.path.join(NATIVE, "sched")])
    out = os.path.join(TMP, "mixed.pb.gz")
    p = coprof("export", s, t, "--format", "pprof", "-o", out, ok=False)
    check(p.returncode == 2 and "all sampled or all traced" in p.stderr,
          f"mixed: exit {p.returncode}: {p.stderr}")
    p = coprof("export", s, "--format", "pprof", "-o", os.path.join(TMP, "no", "x.pb.gz"),
               ok=False)
    check(p.returncode == 2 and "No such file or directory" in p.stderr,
          f"unwritable: exit {p.returncode}: {p.stderr}")
    p = coprof("export", os.path.join(TMP, "missing.pstat"), "--format", "pprof", "-o", out,
               ok=False)
    check(p.returncode == 2 and p.stderr.count("\n") == 1, f"missing: {p.stderr}")


def windows(tmpl):
    """{number: (stats, extras)} of the window files tmpl (with %n) names."""
    out = {}
    pat = re.compile("^" + re.escape(os.path.basename(tmpl)).replace("%n", r"(\d+)") + "$")
    d = os.path.dirname(tmpl)
    for f in os.listdir(d):
        m = pat.match(f)
        if m:
            out[int(m.group(1))] = load(os.path.join(d, f))
    return out


def check_back_to_back(ws, interval):
    """Windows 1..N, each from start to stop, the next starting where it stopped. (A
    window lasts at least as long as the previous one took to write, which on a loaded
    machine may be several intervals: no upper bound is checked.)"""
    nums = sorted(ws)
    check(nums == list(range(1, len(nums) + 1)), f"window numbers {nums}")
    for i in nums:
        ex = ws[i][1]
        check(ex["stop"] > ex["start"], f"window {i}: stop {ex['stop']} <= start {ex['start']}")
        if i + 1 in ws:
            gap = ws[i + 1][1]["start"] - ex["stop"]
            check(0 <= gap < 0.05, f"window {i + 1} starts {gap:.4f} s after {i} stopped")


def record_windows(name, opts, cmd, interval, env=None):
    d = os.path.join(TMP, name)
    os.makedirs(d)
    tmpl = os.path.join(d, "w.%n.pstat")
    p = subprocess.run([BIN, "record", "-o", tmpl, "--interval", str(interval)] + opts + ["--"]
                       + cmd, env=env or base_env(), cwd=d, capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    check("coprof" not in p.stderr, f"stderr: {p.stderr}")
    return tmpl, p


def sampled_windows(name="ws"):
    """cpu-split's 1.5 s of CPU sampled at 997 Hz in windows of 0.2 s: (the windows'
    template, {number: (stats, extras)}, {"heavy": samples, "light": samples} over all
    windows)."""
    tmpl, _ = record_windows(name, ["--mode", "sample", "-c", "cpu", "--hz", "997"],
                             [os.path.join(CPU, "cpu-split"), "1.5"], 0.2)
    ws = windows(tmpl)
    leaves = {"heavy": 0, "light": 0}
    for _, ex in ws.values():
        for task, tid, frames, count, waiting in ex["stacks"]:
            if frames[0][2] in leaves:
                leaves[frames[0][2]] += count
    return tmpl, ws, leaves


def case_windows_sample():
    """Sample mode: windows back to back whose merge is the whole run (heavy and light
    sampled in it; their 2:1 share is bench/sample/accuracy.py's), exported to pprof
    like any merged files."""
    t0 = time.time()
    tmpl, ws, leaves = sampled_windows()
    check(len(ws) >= 4, f"{len(ws)} windows in {time.time() - t0:.1f} s at 0.2 s")
    check_back_to_back(ws, 0.2)
    for i, (_, ex) in ws.items():
        check(len(ex["stack_ns"]) == len(ex["stacks"]), f"window {i}: stack_ns")
    check(leaves["heavy"] > 0 and leaves["light"] > 0, f"the windows' samples: {leaves}")
    paths = [tmpl.replace("%n", str(i)) for i in sorted(ws)]
    pb, err = export(paths, "windows.pb.gz")
    check_top(paths, pb)
    check_stacks(paths, pb)


def case_windows_trace():
    """Trace mode: every call lands in exactly one window, so the windows' merged call
    counts equal a run without windows."""
    calls = lambda r: {f["name"]: f["nc"] for f in r["functions"]}  # noqa: E731
    # naps of 0 ms: a task is runnable again as soon as it yields, so sched never idles
    # and every call count is fixed (with naps, how often its idle path runs depends on
    # the machine's load, and a count taken for fixed from two runs moved in a third)
    prog = [os.path.join(NATIVE, "sched"), "10", "20", "0"]
    a = calls(report([record("whole.pstat", ["-c", "wall"], prog)]))
    check(len(a) >= 6 and "idle_until" not in a, f"whole run's functions: {sorted(a)}")
    tmpl, _ = record_windows("wt", ["-c", "wall"], prog, 0.05)
    ws = windows(tmpl)
    check(len(ws) >= 3, f"only {len(ws)} windows")
    check_back_to_back(ws, 0.05)
    b = calls(report([tmpl.replace("%n", str(i)) for i in sorted(ws)]))
    diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if b.get(k) != a.get(k)}
    check(not diff, f"calls (whole run, windows) differ: {diff}")


def case_windows_toggle():
    """With toggling: windows only while profiling is on, a stop toggle ends (and
    writes) the current window, and numbering runs on across sessions."""
    d = os.path.join(TMP, "wtog")
    os.makedirs(d)
    tmpl = os.path.join(d, "w.%n.pstat")
    p = subprocess.Popen([BIN, "record", "--no-start", "--mode", "sample", "--interval", "0.2",
                          "-o", tmpl, "--", os.path.join(CPU, "cpu-split"), "30"],
                         env=base_env(), cwd=d, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: catches(p.pid, signal.SIGUSR2), 20, "the toggle handler")
        time.sleep(0.3)
        check(not os.listdir(d), f"files before profiling started: {os.listdir(d)}")
        toggle(p.pid)
        wait_for(lambda: len(windows(tmpl)) >= 2, 20, "two windows")
        toggle(p.pid)
        t_off = time.time()
        n1 = len(windows(tmpl))
        wait_for(lambda: len(windows(tmpl)) >= n1, 5, "the stop's window")
        time.sleep(0.8)
        first = windows(tmpl)
        check(len(first) <= n1 + 1, f"windows written while off: {sorted(first)} after {n1}")
        toggle(p.pid)
        wait_for(lambda: len(windows(tmpl)) >= len(first) + 2, 20, "windows of session 2")
        toggle(p.pid)
        time.sleep(0.5)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    ws = windows(tmpl)
    nums = sorted(ws)
    check(nums == list(range(1, len(nums) + 1)), f"numbers {nums}")
    last1 = max(first)
    check_back_to_back({i: ws[i] for i in ws if i <= last1}, 0.2)
    # the stop toggle ended window last1: it stopped then, before the pause, and the
    # next session's first window started after the pause
    stop1, start2 = ws[last1][1]["stop"], ws[last1 + 1][1]["start"]
    check(stop1 <= t_off + 0.05, f"last window of session 1 stopped {stop1 - t_off:.3f} s "
          "after the stop toggle")
    check(start2 - stop1 >= 0.7, f"session 2 started {start2 - stop1:.3f} s after session 1")


def case_windows_keep():
    """COPROF_KEEP=3: only the three newest windows stay."""
    tmpl, _ = record_windows("wk", ["--mode", "sample", "--keep", "3"],
                             [os.path.join(CPU, "cpu-split"), "1"], 0.1)
    nums = sorted(windows(tmpl))
    check(len(nums) == 3, f"kept {nums}")
    check(nums == list(range(nums[0], nums[0] + 3)) and nums[0] > 1, f"kept {nums}")


def case_windows_dir_gone():
    """The windows' directory vanishes mid-run: the OS's reason, once, on stderr; the
    program runs on unharmed; once the directory is back, windows are written again."""
    d = os.path.join(TMP, "wgone")
    os.makedirs(d)
    tmpl = os.path.join(d, "w.%n.pstat")
    p = subprocess.Popen([BIN, "record", "--mode", "sample", "--interval", "0.1", "-o", tmpl,
                          "--", os.path.join(CPU, "cpu-split"), "2"], env=base_env(), cwd=TMP,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(windows(tmpl)) >= 1, 30, "a first window")
        os.rename(d, d + ".away")
        time.sleep(0.6)
        os.makedirs(d)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(p.returncode == 0 and "cpu-split:" in err, f"exit {p.returncode}: {out} {err}")
    lines = [l for l in err.splitlines() if "cannot write the window" in l]
    check(len(lines) == 1 and "No such file or directory" in lines[0],
          f"expected one line with the OS's reason:\n{err}")
    check("windows are written again" in err, f"no word of recovery:\n{err}")
    check(len(windows(tmpl)) >= 1, "no window after the directory came back")
    check(len([l for l in err.splitlines() if l.startswith("coprof")]) == 2,
          f"coprof said more than two lines:\n{err}")


def case_windows_python():
    """CPython (trace mode, asyncio worker): windows back to back, each a pstats file,
    and the tasks in them; the program prints what it prints unprofiled."""
    prog = [sys.executable if os.path.exists(sys.executable) else "python3",
            os.path.join(os.environ["COPROF_SRC"], "samples", "python", "worker.py")]
    env = base_env()
    if ASAN:  # CPython leaks by design at exit; LeakSanitizer cannot tell ours apart
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    plain = subprocess.run(prog, capture_output=True, text=True, timeout=120, env=env)
    tmpl, p = record_windows("wpy", ["-c", "wall"], prog, 0.2, env)
    check(p.stdout == plain.stdout, f"output changed:\n{p.stdout}\nvs\n{plain.stdout}")
    ws = windows(tmpl)
    check(len(ws) >= 3, f"only {len(ws)} windows")
    check_back_to_back(ws, 0.2)
    check(sum(len(ex["tasks"]) for _, ex in ws.values()) > 0, "no task in any window")
    for i, (stats, _) in ws.items():
        check(len(stats) > 0, f"window {i} is empty")


if __name__ == "__main__":
    try:
        run_cases(globals())
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
