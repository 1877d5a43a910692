#!/usr/bin/env python3
"""check-layers.py [SRCROOT] [--graph]: the include rules of doc/design.md ("The engine's
two doors", "The shim's layers"), checked on the sources as they stand. Exits 1 and
names each break; prints the graph's figures either way (--graph: every arrow too).

- preload/ reaches libprof/ through its two doors only: coprof.h and coprof-private.h;
  preload/python/ also through engine-inline.h, the hot path its events inline.
- The shim's files sit in layers, one or more folders each (LAYERS). A file may include
  a header of its own layer or of one below, and use (name) what a file of its own
  layer or of one below defines; an arrow that runs back up is an error unless UPWARD
  names it. An arrow is a pair of files: A includes a header of B's folder, or A names
  a function or variable that B defines and a header A includes declares.
- No circle of more than MAX_CIRCLE files: the files that use each other, each through
  the headers it includes, one strongly connected set at most that large.
- One header per folder (preload/python/ aside, HEADERS), declaring only what its
  folder's files define; signal-safe.h is the one place that declares every function
  a signal handler may reach, each folder's.
"""
import os
import re
import sys

ROOT = os.path.abspath(next((a for a in sys.argv[1:] if not a.startswith("--")),
                            os.path.join(os.path.dirname(__file__), "..")))
SHOW = "--graph" in sys.argv
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE = (".c", ".h", ".S")
DOORS = {"libprof/include/coprof.h", "libprof/coprof-private.h"}
ADAPTER_DOORS = DOORS | {"libprof/engine-inline.h"}

# The layers, bottom first: each a name and the folders of preload/ in it.
LAYERS = [
    ("state", ["preload/state"]),
    ("services", ["preload/service"]),
    ("python adapter", ["preload/python"]),
    ("sampler", ["preload/sampler"]),
    ("runtimes", ["preload/runtime"]),
    ("lifecycle", ["preload/lifecycle", "preload/keeper"]),
]
# Headers that are no folder's: the signal-reachable functions of every layer.
SIGNAL_SAFE = "preload/signal-safe.h"
# Arrows allowed to run back up: (from file, to file or folder): why (doc/design.md).
UPWARD = {}
MAX_CIRCLE = 3
# Folders with more than one header, and how many: preload/python has adapter.h (the
# adapter's face to the shim, without Python.h), py.h (its own, with Python.h) and
# callback.h (header-only code that a benchmark's module built alone includes too);
# its hook/ has hook.h, as every folder has one.
HEADERS = {"preload/python": 3}
# Circles allowed for now, by folder, and why (none).
PENDING_CIRCLES = {}


def sources(top):
    out = []
    for d, _, files in os.walk(os.path.join(ROOT, top)):
        out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files if f.endswith(SOURCE)]
    return sorted(out)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def code(text):
    """The text without comments and string literals (names in them name nothing)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def resolve(src, name):
    """Where the compiler finds `name` included from `src`: the includer's folder first,
    then the folders meson gives preload/ (preload/, libprof/include, libprof/)."""
    for d in (os.path.dirname(src), "preload", "libprof/include", "libprof"):
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(ROOT, p)):
            return p
    return None


def layer_of(path):
    for rank, (_, folders) in enumerate(LAYERS):
        if any(path == f or path.startswith(f + "/") for f in folders):
            return rank
    return None


def top_level(text):
    """The statements at file scope: (text, has a body) with bodies cut out."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "{":
            depth += 1
            if depth == 1:
                cur.append("{}")
            continue
        if ch == "}":
            depth -= 1
            if depth == 0:
                stmt = "".join(cur)
                if re.search(r"\)\s*\{\}\s*$", stmt):  # a function's body ends it
                    out.append(stmt)
                    cur = []
            continue
        if depth:
            continue
        cur.append(ch)
        if ch == ";":
            out.append("".join(cur))
            cur = []
    return out


NAME = r"([A-Za-z_]\w*)"


def declared(header_code):
    """Functions and variables a header declares without defining (no body, or extern)."""
    names = set()
    for stmt in top_level(re.sub(r"^\s*#.*$", "", header_code, flags=re.M)):
        s = " ".join(stmt.split())
        if "{}" in s or s.startswith(("typedef", "struct", "enum", "union")) and "(" not in s:
            continue
        m = re.search(NAME + r"\s*\((?:[^()]|\([^()]*\))*\)\s*(?:__attribute__\S*\s*)*;$", s)
        if m and not s.startswith("typedef"):
            names.add(m.group(1))
        elif s.startswith("extern"):
            m = re.search(NAME + r"\s*(?:\[[^\]]*\])?\s*(?:PL_\w+\s*)?;$", s)
            if m:
                names.add(m.group(1))
    return names - {"__attribute__"}


def defined(c_code):
    """Functions and variables a .c file defines at file scope, not static."""
    names = set()
    for stmt in top_level(re.sub(r"^\s*#.*$", "", c_code, flags=re.M)):
        s = " ".join(stmt.split())
        if s.startswith(("static", "extern", "typedef")) or "__asm__" in s:
            continue
        m = re.search(NAME + r"\s*\((?:[^()]|\([^()]*\))*\)\s*\{\}$", s)
        if m:
            names.add(m.group(1))
            continue
        if "(" in s and not re.search(r"=", s):
            continue  # a declaration of a function
        m = re.search(NAME + r"\s*(?:\[[^\]]*\])?\s*(?:PL_\w+\s*)?(?:=.*)?;$", s)
        if m and not re.match(r"(struct|enum|union)\s+\w+\s*;$", s):
            names.add(m.group(1))
    asm = re.findall(r'\.globl\s+(\w+)', c_code.replace("\\n", "\n"))
    return names | set(asm)


def main():
    errors = []
    files = sources("preload")
    texts = {f: code(read(f)) for f in files}
    incs = {}
    for src in files:
        doors = ADAPTER_DOORS if src.startswith("preload/python/") else DOORS
        incs[src] = []
        for name in INCLUDE.findall(read(src)):
            path = resolve(src, name)
            if path is None:
                errors.append("%s: includes %s, which is in no folder the build gives it"
                              % (src, name))
            elif path.startswith("libprof/"):
                if path not in doors:
                    errors.append("%s: includes %s: libprof/ is reached through %s only"
                                  % (src, path, ", ".join(sorted(doors))))
            else:
                incs[src].append(path)

    def closure(f, seen=None):
        seen = set() if seen is None else seen
        for h in incs.get(f, []):
            if h not in seen:
                seen.add(h)
                closure(h, seen)
        return seen

    headers = [f for f in files if f.endswith(".h")]
    cfiles = [f for f in files if not f.endswith(".h")]
    decl = {h: declared(texts[h]) for h in headers}
    defs = {c: defined(texts[c]) for c in cfiles}
    definer = {}
    for c in cfiles:
        for n in defs[c]:
            definer.setdefault(n, set()).add(c)

    # Arrows between files: includes, and uses through an included header.
    arrows = {}  # (from, to) -> how
    for c in cfiles:
        words = set(re.findall(r"\b\w+\b", texts[c]))
        for h in sorted(closure(c)):
            for n in sorted(decl[h] & words):
                for d in definer.get(n, ()):
                    if d != c:
                        arrows.setdefault((c, d), "%s (%s)" % (n, h))
    for f in files:
        for h in incs[f]:
            arrows.setdefault((f, h), "#include")

    up = []
    for (a, b), how in sorted(arrows.items()):
        la, lb = layer_of(a), layer_of(b)
        if b == SIGNAL_SAFE or la is None or lb is None or lb <= la:
            continue
        key = next((k for k in UPWARD if a == k[0] and (b == k[1] or b.startswith(k[1] + "/"))),
                   None)
        up.append((a, b, how, key))
        if key is None:
            errors.append("%s -> %s runs up from %s to %s: %s"
                          % (a, b, LAYERS[la][0], LAYERS[lb][0], how))
    for f in files:
        if layer_of(f) is None and f != SIGNAL_SAFE:
            errors.append("%s: in no layer (scripts/check-layers.py, LAYERS)" % f)

    # Circles: strongly connected sets of the files that use each other.
    graph = {}
    for (a, b) in arrows:
        if not a.endswith(".h") and not b.endswith(".h"):
            graph.setdefault(a, set()).add(b)
    circles = [s for s in scc(cfiles, graph) if len(s) > 1]
    pending = []
    for s in circles:
        why = [f for f in PENDING_CIRCLES if all(x.startswith(f + "/") for x in s)]
        if why:
            pending.append("  pending, %s: %s" % (why[0], PENDING_CIRCLES[why[0]]))
        elif len(s) > MAX_CIRCLE:
            errors.append("a circle of %d files (at most %d): %s"
                          % (len(s), MAX_CIRCLE, " ".join(sorted(s))))

    # Signal-reachable functions are declared in signal-safe.h, and there only.
    if SIGNAL_SAFE in decl:
        for h in headers:
            for n in sorted(decl[h] & decl[SIGNAL_SAFE]) if h != SIGNAL_SAFE else ():
                errors.append("%s declares %s again: it is in %s" % (h, n, SIGNAL_SAFE))

    # One header per folder, declaring only its folder's code.
    byfolder = {}
    for h in headers:
        if h != SIGNAL_SAFE:
            byfolder.setdefault(os.path.dirname(h), []).append(h)
    for folder, hs in sorted(byfolder.items()):
        if len(hs) > HEADERS.get(folder, 1):
            errors.append("%s: %d headers (%s); a folder has one"
                          % (folder, len(hs), " ".join(os.path.basename(h) for h in hs)))
        for h in hs:
            for n in sorted(decl[h]):
                where = {os.path.dirname(d) for d in definer.get(n, ())}
                if where and folder not in where and not any(
                        w.startswith(folder + "/") for w in where):
                    errors.append("%s declares %s, defined in %s"
                                  % (h, n, " ".join(sorted(where))))

    nup = len({(a, b) for a, b, _, _ in up})
    print("check-layers: %d files, %d arrows (%d between .c files), %d up, %d circles%s"
          % (len(files), len(arrows), sum(len(v) for v in graph.values()), nup, len(circles),
             " (largest %d)" % max(map(len, circles)) if circles else ""))
    for a, b, how, key in up:
        print("  up: %s -> %s: %s%s" % (a, b, how, " [%s]" % UPWARD[key] if key else ""))
    for s in circles:
        print("  circle of %d: %s" % (len(s), " ".join(sorted(s))))
    for p in pending:
        print(p)
    if SHOW:
        for (a, b), how in sorted(arrows.items()):
            print("  %s -> %s: %s" % (a, b, how))
    for e in errors:
        print(e)
    print("check-layers: %s" % ("%d errors" % len(errors) if errors else "ok"))
    return 1 if errors else 0


def scc(nodes, graph):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            out.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return out


sys.exit(main())
