"""pytest_checks.py WORKDIR: the pytest plugin as pip installed it (pytest11 entry
point), on a small suite with a plain test, a parametrized one, a pytest-asyncio one
and one that asks for the coprof_profile fixture."""
import marshal
import os
import shutil
import subprocess
import sys

work = os.path.join(sys.argv[1], "pytest")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failed = []
SUITE = '''
import asyncio
import time
import pytest


def spin(n):
    return sum(i * i for i in range(n))


def test_plain():
    spin(20000)


@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    spin(1000 * n)


async def waiter():
    await asyncio.sleep(0.05)


@pytest.mark.asyncio
async def test_async():
    await asyncio.gather(waiter(), waiter())


def test_fixture(coprof_profile):
    spin(3000)
'''
with open(os.path.join(work, "test_suite.py"), "w") as f:
    f.write(SUITE)
# The rootdir, so node ids are relative to it (not to the source tree's pyproject.toml).
with open(os.path.join(work, "pytest.ini"), "w") as f:
    f.write("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def check(name, ok):
    print("%s %s" % ("ok  " if ok else "FAIL", name))
    if not ok:
        failed.append(name)


def pytest(*args):
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                       cwd=work, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def load(path):
    with open(path, "rb") as f:
        return marshal.load(f), marshal.load(f)


def funcs(stats, name):
    return [v for k, v in stats.items() if k[2] == name]


rc, out = pytest("--coprof=wall", "--coprof-dir", "prof", "--coprof-top", "3", "test_suite.py")
print(out[-3000:])
check("pytest --coprof=wall passes", rc == 0)
files = sorted(os.listdir(os.path.join(work, "prof")))
want = ["test_suite.py__test_async.pstat", "test_suite.py__test_fixture.pstat",
        "test_suite.py__test_param_1_.pstat", "test_suite.py__test_param_2_.pstat",
        "test_suite.py__test_plain.pstat"]
check("one file per test, named by node id: %s" % files, files == want)
s, e = load(os.path.join(work, "prof", "test_suite.py__test_async.pstat"))
w = funcs(s, "waiter")
check("the asyncio test: waiter called twice, each >= 50 ms of wall: %s" % w,
      len(w) == 1 and w[0][1] == 2 and w[0][3] >= 0.1 and e["clock"] == "wall")
check("the asyncio test's tasks are in its file",
      sum(1 for t in e["tasks"] if t["runtime"] == "asyncio") >= 2)
s, _ = load(os.path.join(work, "prof", "test_suite.py__test_plain.pstat"))
check("the plain test: spin once, test_plain once", [v[1] for v in funcs(s, "spin")] == [1]
      and [v[1] for v in funcs(s, "test_plain")] == [1])
s, _ = load(os.path.join(work, "prof", "test_suite.py__test_fixture.pstat"))
check("the coprof_profile test's file holds it", [v[1] for v in funcs(s, "spin")] == [1])
check("the summary: a section, each test's file and top functions",
      "coprof: wall clock, top 3 per test" in out and
      "test_suite.py::test_param[2] -> prof" in out and "test_suite.py:" in out)

rc, out = pytest("--coprof=cpu", "--coprof-dir", "prof2", "--coprof-filter", "spin",
                 "test_suite.py::test_plain")
check("--coprof-filter: only the functions matching it in the summary",
      rc == 0 and "spin" in out and " test_plain\n" not in out.split("coprof: cpu")[-1])

rc, out = pytest("--coprof=sundial", "test_suite.py")
check("--coprof with an unknown clock: a usage error naming the choices",
      rc == 4 and "'cpu', 'wall'" in out)

rc, out = pytest("--coprof-dir", "prof3", "test_suite.py::test_fixture", "test_suite.py::test_plain")
check("without --coprof only the fixture's test is profiled",
      rc == 0 and os.listdir(os.path.join(work, "prof3")) == ["test_suite.py__test_fixture.pstat"])

print("pytest_checks: %d failed" % len(failed))
sys.exit(1 if failed else 0)
