"""coprof's pytest plugin, registered through the pytest11 entry point.

    pytest --coprof=cpu|wall [--coprof-dir DIR] [--coprof-filter TEXT] [--coprof-top N]

profiles each selected test's call (not its fixtures' setup and teardown) with the
same engine as `coprof record`, writes one pstat file per test into DIR (default
coprof-profiles/), named after the test's node id, and prints each test's top N
functions by total time in the terminal summary (--coprof-filter: only functions whose
"file:line name" contains TEXT). Async tests run by pytest-asyncio are profiled like
any other: their tasks are in the file's task table. The coprof_profile fixture
profiles one test on request, without --coprof.

Nothing is imported or started unless one of those is used: the plugin is loaded in
every pytest run of an environment coprof is installed in.
"""
import os
import re

import pytest

CLOCKS = ("cpu", "wall")
DEFAULT_DIR = "coprof-profiles"
_NOISE = (os.sep + "_pytest" + os.sep, os.sep + "pluggy" + os.sep)


def pytest_addoption(parser):
    g = parser.getgroup("coprof", "profiling with coprof")
    g.addoption("--coprof", choices=CLOCKS, default=None, metavar="CLOCK",
                help="profile each test's call under the cpu or wall clock, one pstat "
                     "file per test")
    g.addoption("--coprof-dir", default=DEFAULT_DIR, metavar="DIR",
                help="where the pstat files go (default: %s)" % DEFAULT_DIR)
    g.addoption("--coprof-filter", default=None, metavar="TEXT",
                help="in the summary, only functions whose 'file:line name' contains TEXT")
    g.addoption("--coprof-top", type=int, default=10, metavar="N",
                help="functions per test in the terminal summary (default 10; 0: none)")


def file_name(nodeid):
    """A file name for a test's node id: what is not a letter, digit, '.', '-' or '_'
    becomes '_' (tests/test_a.py::test_b[1] -> tests_test_a.py__test_b_1_)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", nodeid).lstrip(".") or "test"
    return name[:200] + ".pstat"


class _Session:
    """What --coprof collects over the run: per test, its file and its top functions."""

    def __init__(self, config):
        self.clock = config.getoption("coprof")
        self.dir = config.getoption("coprof_dir")
        self.filter = config.getoption("coprof_filter")
        self.top = config.getoption("coprof_top")
        self.done = []  # (nodeid, path, [YFuncStat])

    def begin(self):
        import coprof
        os.makedirs(self.dir, exist_ok=True)
        coprof.set_clock_type(self.clock)
        coprof.clear_stats()
        coprof.start()

    def end(self, nodeid):
        import coprof
        coprof.stop()
        path = os.path.join(self.dir, file_name(nodeid))
        stats = coprof.get_func_stats(filter_callback=self._shown)
        try:
            coprof.dump(path)
        except (OSError, coprof.CoprofError) as e:
            path = "(not written: %s)" % e
        self.done.append((nodeid, path, list(stats.sort("ttot"))[:max(self.top, 0)]))

    def _shown(self, s):
        if any(n in s.module for n in _NOISE):
            return False
        return self.filter is None or self.filter in s.full_name


def pytest_configure(config):
    if config.getoption("coprof"):
        config.pluginmanager.register(_Session(config), "coprof-session")
        config.addinivalue_line("markers", "coprof: profiled by coprof")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    sess = item.config.pluginmanager.get_plugin("coprof-session")
    if sess is None or "coprof_profile" in getattr(item, "fixturenames", ()):
        yield
        return
    sess.begin()
    try:
        yield
    finally:
        sess.end(item.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    sess = config.pluginmanager.get_plugin("coprof-session")
    if sess is None or not sess.done:
        return
    tr = terminalreporter
    tr.section("coprof: %s clock, top %d per test" % (sess.clock, sess.top))
    for nodeid, path, top in sess.done:
        tr.write_line("%s -> %s" % (nodeid, path))
        if not top:
            continue
        tr.write_line("  %8s %10s %10s  %s" % ("ncall", "tsub", "ttot", "function"))
        for s in top:
            n = "%d/%d" % (s.ncall, s.nactualcall) if s.ncall != s.nactualcall else str(s.ncall)
            tr.write_line("  %8s %10.6f %10.6f  %s" % (n, s.tsub, s.ttot, s.full_name))


@pytest.fixture
def coprof_profile(request):
    """Profiles the test that asks for it (under --coprof's clock, else cpu) and writes
    its file into --coprof-dir; gives the coprof.profile object, whose .stats (a
    YFuncStats) is filled once the test ends."""
    import coprof
    clock = request.config.getoption("coprof") or "cpu"
    d = request.config.getoption("coprof_dir")
    os.makedirs(d, exist_ok=True)
    p = coprof.profile(clock=clock, out=os.path.join(d, file_name(request.node.nodeid)))
    with p:
        yield p
