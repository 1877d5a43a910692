"""Prints every Python 3 interpreter tests should run, one path a line: Debian's
/usr/bin/python3 and each pyenv version 3.x (found by globbing, never hard-coded)."""
import glob
import os

root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
found = []
for p in ["/usr/bin/python3"] + sorted(glob.glob(os.path.join(root, "versions", "3.*", "bin", "python3"))):
    if os.access(p, os.X_OK) and os.path.realpath(p) not in [os.path.realpath(f) for f in found]:
        found.append(p)
print("\n".join(found))
