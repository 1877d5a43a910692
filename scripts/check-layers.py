#!/usr/bin/env python3
"""check-layers.py [SRCROOT]: the include rules of doc/design.md ("The engine's two
doors"), checked on the sources as they stand. Exits 1 and names each file that breaks
one; prints the include graph's figures either way.

- preload/ reaches libprof/ through its two doors only: coprof.h (the public API) and
  coprof-private.h (the engine-private boundary); preload/python/ also through
  engine-inline.h, the hot path its events inline.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE = (".c", ".h", ".S")
DOORS = {"libprof/include/coprof.h", "libprof/coprof-private.h"}
ADAPTER_DOORS = DOORS | {"libprof/engine-inline.h"}


def sources(top):
    """The C sources and headers under `top` (relative to ROOT), sorted."""
    out = []
    for d, _, files in os.walk(os.path.join(ROOT, top)):
        out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files if f.endswith(SOURCE)]
    return sorted(out)


def resolve(src, name):
    """Where the compiler finds `name` included from `src`: the includer's folder first,
    then the include folders meson gives preload/ (preload/, libprof/include, libprof/)."""
    for d in (os.path.dirname(src), "preload", "libprof/include", "libprof"):
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(ROOT, p)):
            return p
    return None


def includes(src):
    with open(os.path.join(ROOT, src), encoding="utf-8") as f:
        text = f.read()
    return [(name, resolve(src, name)) for name in INCLUDE.findall(text)]


def main():
    errors = []
    for src in sources("preload"):
        doors = ADAPTER_DOORS if src.startswith("preload/python/") else DOORS
        for name, path in includes(src):
            if path is None:
                errors.append("%s: includes %s, which is in no folder the build gives it"
                              % (src, name))
            elif path.startswith("libprof/") and path not in doors:
                errors.append("%s: includes %s: libprof/ is reached through %s only"
                              % (src, path, ", ".join(sorted(doors))))
    for e in errors:
        print(e)
    print("check-layers: %s" % ("%d errors" % len(errors) if errors else "ok"))
    return 1 if errors else 0


sys.exit(main())
