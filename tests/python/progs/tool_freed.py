"""coprof's sys.monitoring tool is taken off cleanly: with COPROF_PY_HOOK=monitoring
the program sees coprof holding a tool id, toggles profiling off with SIGUSR2, and
then finds the id free (no events, no callbacks), claims and frees it itself, and
toggles profiling on again. Prints one JSON line of what it saw."""
import json
import os
import signal
import sys
import time

mon = sys.monitoring
E = mon.events
EVENTS = (E.PY_START, E.PY_RESUME, E.PY_THROW, E.PY_RETURN, E.PY_YIELD, E.PY_UNWIND,
          E.CALL, E.C_RETURN, E.C_RAISE)


def coprof_tool():
    ids = [i for i in range(6) if mon.get_tool(i) == "coprof"]
    return ids[0] if ids else None


def wait_for(cond):
    end = time.monotonic() + 20
    while not cond() and time.monotonic() < end:
        time.sleep(0.01)  # the control thread takes the GIL meanwhile
    return cond()


def work(n):
    return sum(i for i in range(n))


seen = {}
tool = coprof_tool()
seen["on"] = tool
if tool is not None:
    seen["events_on"] = mon.get_events(tool)
    work(1000)
    os.kill(os.getpid(), signal.SIGUSR2)
    seen["freed"] = wait_for(lambda: mon.get_tool(tool) is None)
    mon.use_tool_id(tool, "mine")
    seen["events_off"] = mon.get_events(tool)
    seen["callbacks_off"] = [repr(mon.register_callback(tool, e, None)) for e in EVENTS]
    mon.free_tool_id(tool)
    os.kill(os.getpid(), signal.SIGUSR2)
    seen["again"] = wait_for(lambda: coprof_tool() is not None)
    work(1000)
print(json.dumps(seen))
