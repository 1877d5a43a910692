"""coprof._stats: yappi's stat objects over coprof's files.

A profile is the file the engine writes (doc/format.md): a pstats dictionary, then the
extras (clock, tasks, threads...). These classes read it into the shapes yappi's
get_func_stats(), get_thread_stats() and get_greenlet_stats() return, with the same
attributes, sort keys and printing, so code written for yappi reads coprof's numbers.
"""
import marshal
import os
import sys

SORT_KEYS = {
    "name": "name", "callcount": "ncall", "ncall": "ncall", "totaltime": "ttot",
    "ttot": "ttot", "subtime": "tsub", "tsub": "tsub", "avgtime": "tavg", "tavg": "tavg",
    "lineno": "lineno", "module": "module",
}
SORT_ORDERS = {"asc": False, "ascending": False, "desc": True, "descending": True}
SAVE_TYPES = ("pstat", "callgrind", "pprof")
FILTER_KEYS = ("name", "module", "lineno", "ctx_name", "ctx_id", "tag")
SYNTHETIC_FILE = "~"
# coprof's own Python functions (start, stop...) are left out of the stats, as yappi
# leaves out its own.
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _choices(what, value, valid):
    return ValueError("unknown %s %r; choose one of: %s" % (what, value, ", ".join(valid)))


def load(path):
    """(stats, extras) of a coprof file; extras {} for a plain pstats file."""
    with open(path, "rb") as f:
        stats = marshal.load(f)
        try:
            extras = marshal.load(f)
        except (EOFError, ValueError, TypeError):
            extras = {}
    return stats, extras if isinstance(extras, dict) else {}


def merge(profiles):
    """One (stats, extras) from several windows' files, summed as pstats.add does."""
    stats, extras = {}, {}
    for s, e in profiles:
        for key, (cc, nc, tt, ct, callers) in s.items():
            if key not in stats:
                stats[key] = (cc, nc, tt, ct, dict(callers))
                continue
            c0, n0, t0, k0, cl = stats[key]
            for ck, edge in callers.items():
                old = cl.get(ck)
                cl[ck] = edge if old is None else tuple(a + b for a, b in zip(old, edge))
            stats[key] = (c0 + cc, n0 + nc, t0 + tt, k0 + ct, cl)
        if not extras:
            extras = dict(e)
            extras["tasks"] = list(e.get("tasks", []))
            extras["threads"] = list(e.get("threads", []))
        else:
            extras["stop"] = e.get("stop", extras.get("stop"))
            extras["tasks"] += e.get("tasks", [])
            extras["threads"] += e.get("threads", [])
    return stats, extras


def atomic_write(path, write):
    """Calls write(file object) on a temporary beside `path`, then renames it there: on
    any error (the directory unwritable, the disk full) no file, whole or partial, is
    left, and the OSError says the OS's reason."""
    import tempfile

    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=".coprof-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class _Stat:
    _fields = ()

    def __getitem__(self, i):
        return getattr(self, self._fields[i])

    def __repr__(self):
        return "<%s %s>" % (type(self).__name__, ", ".join(
            "%s=%r" % (k, getattr(self, k)) for k in self._fields))


class YChildFuncStat(_Stat):
    """One callee of a function, as yappi's children entries."""
    _fields = ("name", "module", "lineno", "ncall", "nactualcall", "ttot", "tsub", "tavg",
               "full_name")

    def __init__(self, key, nc, cc, tt, ct):
        self.module, self.lineno, self.name = key
        self.ncall, self.nactualcall, self.tsub, self.ttot = nc, cc, tt, ct
        self.tavg = ct / nc if nc else 0.0
        self.full_name = "%s:%d %s" % key
        self.builtin = self.module == SYNTHETIC_FILE


class YFuncStat(_Stat):
    """One function: yappi's YFuncStat attributes, from one pstats entry.
    ncall counts every call, nactualcall the non-recursive ones (pstats' nc and cc)."""
    _fields = ("name", "module", "lineno", "ncall", "nactualcall", "builtin", "ttot",
               "tsub", "index", "children", "ctx_id", "ctx_name", "tag", "tavg",
               "full_name")

    def __init__(self, key, entry, index, ctx_id, ctx_name):
        cc, nc, tt, ct, _ = entry
        self.module, self.lineno, self.name = key
        self.key = key
        self.ncall, self.nactualcall, self.tsub, self.ttot = nc, cc, tt, ct
        self.tavg = ct / nc if nc else 0.0
        self.builtin = self.module == SYNTHETIC_FILE
        self.index, self.ctx_id, self.ctx_name, self.tag = index, ctx_id, ctx_name, 0
        self.full_name = "%s:%d %s" % key
        self.children = []

    def __eq__(self, other):
        return isinstance(other, YFuncStat) and self.full_name == other.full_name

    def __hash__(self):
        return hash(self.full_name)

    def strip_dirs(self):
        self.module = os.path.basename(self.module)
        self.full_name = "%s:%d %s" % (self.module, self.lineno, self.name)
        return self


def context_stats(extras, ctx_id):
    """The pstats dictionary of one context (yappi's ctx_id): a thread's (ids 0 to
    threads-1: the functions it called first, its roots; the engine keeps functions per
    process and per task, not per thread) or a task's (the ids after: its own
    functions); (None, None) for an unknown id."""
    threads, tasks = extras.get("threads", []), extras.get("tasks", [])
    if isinstance(ctx_id, int) and 0 <= ctx_id < len(threads):
        roots = threads[ctx_id].get("roots", {})
        return ({k: (v[1], v[0], v[2], v[3], {}) for k, v in roots.items()},
                threads[ctx_id].get("name"))
    if isinstance(ctx_id, int) and 0 <= ctx_id - len(threads) < len(tasks):
        t = tasks[ctx_id - len(threads)]
        return t.get("stats", {}), t.get("name")
    return None, None


def _fmt(value, width):
    if isinstance(value, float):
        s = "%0.6f" % value
    else:
        s = str(value)
    if len(s) > width:
        s = ".." + s[-(width - 2):] if width > 2 else s[:width]
    return s.ljust(width)


class _StatList:
    _stat_columns = {}
    _sort_default = "ttot"

    def __init__(self, items=(), clock="cpu"):
        self._items = list(items or ())
        self._clock = clock
        self._sorted_by = (self._sort_default, "desc")

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __getitem__(self, i):
        return self._items[i]

    def empty(self):
        return not self._items

    def sort(self, sort_type=None, sort_order="desc"):
        sort_type = self._sort_default if sort_type is None else sort_type
        attr = self._sort_attr(sort_type)
        if not isinstance(sort_order, str) or sort_order.lower() not in SORT_ORDERS:
            raise _choices("sort order", sort_order, SORT_ORDERS)
        self._items.sort(key=lambda s: getattr(s, attr), reverse=SORT_ORDERS[sort_order.lower()])
        self._sorted_by = (sort_type, sort_order.lower())
        return self

    def _sort_attr(self, sort_type):
        valid = self._sort_keys()
        if not isinstance(sort_type, str) or sort_type.lower() not in valid:
            raise _choices("sort key", sort_type, valid)
        return valid[sort_type.lower()]

    def print_all(self, out=None, columns=None):
        out = sys.stdout if out is None else out  # at the call: pytest swaps it
        columns = columns or self._stat_columns
        out.write("\n")
        self._print_header(out)
        cols = [columns[i] for i in sorted(columns)]
        for name, width in cols:
            out.write(_fmt(name, width) + "  ")
        out.write("\n")
        for s in self._items:
            out.write("  ".join(_fmt(self._column(s, name), width) for name, width in cols))
            out.write("\n")

    def _print_header(self, out):
        pass

    def _column(self, s, name):
        return getattr(s, name)


class YFuncStats(_StatList):
    """What get_func_stats() returns: yappi's YFuncStats over one coprof profile."""
    _stat_columns = {0: ("name", 36), 1: ("ncall", 5), 2: ("tsub", 8), 3: ("ttot", 8),
                     4: ("tavg", 8)}

    def __init__(self, stats=None, extras=None, items=None):
        self._stats = stats or {}
        self._extras = extras or {}
        super().__init__(items, self._extras.get("clock", "cpu"))
        if items is None:
            self._build()
        self.sort("ttot", "desc")

    @staticmethod
    def _sort_keys():
        return SORT_KEYS

    def _build(self):
        synthetic = set(map(tuple, self._extras.get("synthetic", ())))
        threads = self._extras.get("threads", [])
        tasks = self._extras.get("tasks", [])
        owner = {}
        for i, t in enumerate(tasks):
            for key in t.get("stats", {}):
                owner.setdefault(key, (len(threads) + i, t.get("name")))
        main = (0, threads[0].get("name")) if threads else (0, "MainThread")
        by_key = {}
        for index, (key, entry) in enumerate(self._stats.items()):
            if (key in synthetic or key[0].startswith(PACKAGE_DIR) or
                    (key[0] == SYNTHETIC_FILE and "coprof._coprof." in key[2])):
                continue
            ctx_id, ctx_name = owner.get(key, main)
            st = YFuncStat(key, entry, index, ctx_id, ctx_name)
            self._items.append(st)
            by_key[key] = st
        for key, entry in self._stats.items():
            for caller, (nc, cc, tt, ct) in entry[4].items():
                if caller in by_key and key in by_key:
                    by_key[caller].children.append(YChildFuncStat(key, nc, cc, tt, ct))

    def _print_header(self, out):
        out.write("Clock type: %s\n" % self._clock.upper())
        out.write("Ordered by: %s, %s\n\n" % self._sorted_by)

    def _column(self, s, name):
        if name == "ncall" and s.ncall != s.nactualcall:
            return "%d/%d" % (s.ncall, s.nactualcall)
        if name == "name":
            return s.full_name
        return getattr(s, name)

    def get(self, name=None, module=None, lineno=None, full_name=None):
        """The first entry that matches every criterion given, or None."""
        for s in self._items:
            if ((full_name is None or s.full_name == full_name) and
                    (name is None or s.name == name) and
                    (module is None or s.module == module or
                     os.path.basename(s.module) == module) and
                    (lineno is None or s.lineno == lineno)):
                return s
        return None

    def strip_dirs(self):
        for s in self._items:
            s.strip_dirs()
            for c in s.children:
                c.module = os.path.basename(c.module)
                c.full_name = "%s:%d %s" % (c.module, c.lineno, c.name)
        return self

    def filtered(self, flt=None, callback=None):
        flt = flt or {}
        for k in flt:
            if k not in FILTER_KEYS:
                raise _choices("filter key", k, FILTER_KEYS)
        keep = [s for s in self._items
                if all(getattr(s, k) == v or (k == "module" and os.path.basename(s.module) == v)
                       for k, v in flt.items())
                and (callback is None or callback(s))]
        out = YFuncStats(self._stats, self._extras, keep)
        out._sorted_by = self._sorted_by
        return out

    def _pstats_dict(self):
        """The entries shown, and the whole-program tree's nodes (snakeviz draws from
        its root), each with the callers among them."""
        keep = {s.key for s in self._items} | set(map(tuple, self._extras.get("synthetic", ())))
        if len(keep) == len(self._stats):
            return self._stats
        return {k: (e[0], e[1], e[2], e[3], {c: v for c, v in e[4].items() if c in keep})
                for k, e in self._stats.items() if k in keep}

    def save(self, path, type="pstat"):
        """Writes the profile as `type`: pstat (the engine's file, extras included,
        which pstats, snakeviz and coprof read), callgrind or pprof (through
        `coprof export`). OSError with the OS's reason when it cannot; no file is
        left then."""
        if not isinstance(type, str) or type.lower() not in SAVE_TYPES:
            raise _choices("save type", type, SAVE_TYPES)
        type = type.lower()
        data = marshal.dumps(self._pstats_dict()) + marshal.dumps(self._extras)
        if type == "pstat":
            atomic_write(path, lambda f: f.write(data))
            return
        import subprocess
        import tempfile

        from . import command_path  # here: the package imports this module
        with tempfile.TemporaryDirectory(prefix="coprof-save-") as d:
            src, dst = os.path.join(d, "in.pstat"), os.path.join(d, "out")
            with open(src, "wb") as f:
                f.write(data)
            p = subprocess.run([command_path(), "export", src, "--format", type, "-o", dst],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise RuntimeError("coprof export failed: %s" % p.stderr.strip())
            with open(dst, "rb") as f:
                out = f.read()
        atomic_write(path, lambda f: f.write(out))


class YThreadStat(_Stat):
    """One thread: yappi's YThreadStat (name, id, tid, ttot, sched_count)."""
    _fields = ("name", "id", "tid", "ttot", "sched_count")

    def __init__(self, i, t):
        self.name, self.id, self.tid = t.get("name"), i, t.get("tid")
        self.ttot, self.sched_count = t.get("ttot", 0.0), t.get("switches", 0)


class YTaskStat(_Stat):
    """One task (an asyncio task, a greenlet, a C coroutine): name, id (its context id:
    get_func_stats(ctx_id=id) gives its functions), ttot, state, and what coprof adds:
    runtime, thread (its tid), resumes, task_id (the engine's)."""
    _fields = ("name", "id", "ttot", "state", "runtime", "thread", "resumes")

    def __init__(self, ctx_id, t):
        self.name, self.id, self.ttot = t.get("name"), ctx_id, t.get("ttot", 0.0)
        self.task_id = t.get("id")
        self.state, self.runtime = t.get("state"), t.get("runtime")
        self.thread, self.resumes = t.get("thread"), t.get("resumes", 0)
        self.sched_count = self.resumes
        self.tid = self.thread


class YThreadStats(_StatList):
    _stat_columns = {0: ("name", 13), 1: ("id", 5), 2: ("tid", 15), 3: ("ttot", 8),
                     4: ("scnt", 10)}

    @staticmethod
    def _sort_keys():
        return {"name": "name", "id": "id", "tid": "tid", "ttot": "ttot",
                "totaltime": "ttot", "scnt": "sched_count", "schedcount": "sched_count"}

    def _column(self, s, name):
        return s.sched_count if name == "scnt" else getattr(s, name)

    def get(self, name=None, id=None):
        for s in self._items:
            if (name is None or s.name == name) and (id is None or s.id == id):
                return s
        return None


class YTaskStats(YThreadStats):
    _stat_columns = {0: ("name", 24), 1: ("id", 5), 2: ("runtime", 9), 3: ("state", 9),
                     4: ("ttot", 8), 5: ("scnt", 8)}

    @staticmethod
    def _sort_keys():
        return {"name": "name", "id": "id", "ttot": "ttot", "totaltime": "ttot",
                "scnt": "resumes", "state": "state", "runtime": "runtime"}
