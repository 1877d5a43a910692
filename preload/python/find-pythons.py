#!/usr/bin/env python3
"""find-pythons.py: lists the CPython 3.10+ interpreters this machine has, for meson.

Looks at /usr/bin/python3, every pyenv version ($PYENV_ROOT or ~/.pyenv, globbed) and
the prefixes given as arguments (meson option python_prefixes); with --this, only the
Python running it. Prints one line per interpreter whose headers are installed:
"X.Y<TAB>include dir<TAB>executable<TAB>label" (label: X.Y.Z, "system-X.Y.Z" for /usr/bin).
"""
import glob
import os
import subprocess
import sys

QUERY = ("import sys, sysconfig; v = sys.version_info; "
         "print('%d.%d' % (v[0], v[1])); print(sysconfig.get_paths()['include']); "
         "print('%d.%d.%d' % (v[0], v[1], v[2]))")


def candidates(prefixes):
    seen = set()
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = ["/usr/bin/python3"]
    found += sorted(glob.glob(os.path.join(pyenv, "versions", "*", "bin", "python3")))
    found += [os.path.join(p, "bin", "python3") for p in prefixes]
    for exe in found:
        real = os.path.realpath(exe)
        if os.access(exe, os.X_OK) and real not in seen:
            seen.add(real)
            yield exe


def main():
    # --this: only the interpreter running this script (the Python package's build).
    exes = [sys.executable] if sys.argv[1:] == ["--this"] else \
        candidates([p for p in sys.argv[1:] if p])
    for exe in exes:
        try:
            out = subprocess.run([exe, "-I", "-c", QUERY], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            continue
        ver, inc, full = out[0].strip(), out[1].strip(), out[2].strip()
        major, minor = (int(x) for x in ver.split("."))
        if (major, minor) < (3, 10) or not os.path.exists(os.path.join(inc, "Python.h")):
            continue
        if not os.path.exists(os.path.join(inc, "internal", "pycore_frame.h")) and minor >= 11:
            continue
        label = ("system-" if exe.startswith("/usr/") else "") + full
        print("%s\t%s\t%s\t%s" % (ver, inc, exe, label))


main()
