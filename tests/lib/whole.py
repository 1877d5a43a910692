"""The whole-program tree in a coprof file's pstats dict, as snakeviz and gprof2dot see
it (libprof/whole.h): the one check of it, which every test that loads a coprof file
runs (coprof_test.Profile, tests/file/check_pstats.py, check_engine_dump.py). Runs on
every Python 3 (3.6+), as check_pstats.py does.

split() gives the program's own functions back (what coprof's reader keeps), so the
exact checks stay exact; check_tree() checks the synthetic part: one root nobody calls,
every function reached from it, one node per thread and per kind of task
(task_kinds) hanging from the root, each node's ct the sum of its edges', at most
MAX_TASKS nodes of tasks (the rest in one), under the cpu clock in trace mode a root
whose ct is the sum of every own time (design rule 10), and every call of every
function either made by a real caller or hung from exactly one node (in sampled files, a function recursive
through others hangs by the samples of the stacks it starts).
"""
ROOT = ("~", 0, "<whole program>")
EPS = 1e-9
MAX_TASKS = 200  # CP_WHOLE_MAX_TASKS


def split(stats, extras):
    synth = set(extras.get("synthetic", []))
    own = {k: v[:4] + ({c: e for c, e in v[4].items() if c not in synth},)
           for k, v in stats.items() if k not in synth}
    return own, synth


def root_calls(stats):
    """{key: (nc, ct)} of the calls no caller in `stats` made (the C's cp_root_part)."""
    out = {}
    for k, (cc, nc, tt, ct, callers) in stats.items():
        rnc = nc - sum(e[0] for e in callers.values())
        rct = ct - sum(e[3] for c, e in callers.items() if c != k)
        if not callers or rnc > 0 or rct > 1e-10:
            out[k] = (max(rnc, 0), max(rct, 0.0))
    return out


def check_tree(stats, extras, fail):
    """Returns {node name: {callee key: edge}} for the synthetic nodes under the root."""
    synth = list(extras.get("synthetic", []))
    if ROOT not in synth or any(k not in stats for k in synth):
        fail("whole program: synthetic keys %r not all in the dict" % synth[:4])
    if len(set(synth)) != len(synth) or any(k[0] != "~" or k[1] != 0 for k in synth):
        fail("whole program: synthetic keys must be distinct ('~', 0, name): %r" % synth)
    roots = [k for k, v in stats.items() if not v[4]]
    if roots != [ROOT]:
        fail("whole program: functions nobody calls %r, expected only the root" % roots[:4])
    callees = {}
    for k, v in stats.items():
        for c, e in v[4].items():
            callees.setdefault(c, {})[k] = e
    seen, todo = {ROOT}, [ROOT]
    while todo:
        for k in callees.get(todo.pop(), {}):
            if k not in seen:
                seen.add(k)
                todo.append(k)
    if len(seen) != len(stats):
        fail("whole program: %d of %d functions reached from the root" % (len(seen), len(stats)))
    nthreads = len(extras.get("threads", []))
    kinds = task_kinds(stats, extras)
    if len(synth) != 1 + nthreads + min(len(kinds), MAX_TASKS) + (len(kinds) > MAX_TASKS):
        fail("whole program: %d synthetic functions for %d threads and %d kinds of task"
             % (len(synth), nthreads, len(kinds)))
    if extras.get("clock") == "cpu" and extras.get("mode") == "trace":
        own = sum(v[2] for v in stats.values())
        if abs(stats[ROOT][3] - own) > 0.01 * own + 1e-6:
            fail("whole program: cpu: the root's ct %.6f is not the sum of own times %.6f"
                 % (stats[ROOT][3], own))
    nodes = {}
    for k in synth:
        cc, nc, tt, ct, callers = stats[k]
        below = callees.get(k, {})
        if abs(ct - sum(e[3] for e in below.values())) > EPS:
            fail("whole program: %r ct %r is not the sum of its edges'" % (k[2], ct))
        if (cc, nc, tt) != (1, 1, 0.0):
            fail("whole program: %r counts %r, expected one call and no own time" % (k[2], stats[k][:3]))
        if k == ROOT:
            continue
        if callers != {ROOT: (1, 1, 0.0, ct)}:
            fail("whole program: %r hangs from %r, expected the root" % (k[2], callers))
        nodes[k[2]] = below
    real = set(stats) - set(synth)
    for k in real:
        cc, nc, tt, ct, callers = stats[k]
        made = sum(e[0] for c, e in callers.items() if c in real)
        hung = sum(e[0] for c, e in callers.items() if c not in real)
        # sampled, a function that starts stacks but has callers on them in all it
        # counts (recursion through others: Python's imports) hangs by the samples of
        # the stacks it starts, at most all of its own
        recursive = extras.get("mode") == "sample" and nc - made <= 0 and 0 < hung <= nc
        if hung != max(nc - made, 0) and not recursive:
            fail("whole program: %r: %d calls hung from nodes, expected %d" % (k, hung, nc - made))
    return nodes


def task_kinds(stats, extras):
    """[(root key or None, [task, ...]), ...] in the order of the tasks: the tasks each
    node of the tree holds before the largest are drawn (whole.c's add_tasks). A task's
    kind is its heaviest root (the first of equal ones) when the top-level dict has it;
    tasks of one kind share a node, a task of none has its own."""
    kinds, of = [], {}
    for t in extras.get("tasks", []):
        roots = root_calls(t["stats"])
        top = max(roots, key=lambda k: roots[k][1]) if roots else None
        top = top if top in stats else None
        if top is not None and top in of:
            of[top][1].append(t)
        else:
            kinds.append((top, [t]))
            if top is not None:
                of[top] = kinds[-1]
    return kinds


def node_name(kind, tasks):
    """The name of the node that draws `tasks` (of one kind), as whole.c writes it
    before a repeated name gets its number."""
    if len(tasks) > 1:
        return "<tasks: %s \u00d7%d>" % (kind[2], len(tasks))
    return "<task %s>" % (tasks[0]["name"] or "?")


def task_node(nodes, name, kind=None, n=1):
    """The node of the task called `name` ("<task NAME>", or "<task NAME 2>"...), or of
    the `n` tasks of root `kind` that share one ("<tasks: worker \u00d73>")."""
    want = node_name(kind, [{"name": name}] * n)
    return [v for k, v in sorted(nodes.items())
            if k == want or (k.startswith(want[:-1] + " ") and k[-2].isdigit())]
