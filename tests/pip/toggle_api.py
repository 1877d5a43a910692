"""toggle_api.py DIR, under `coprof record --no-start -o DIR/t.%n.pstat`: the API and
`coprof toggle` on one process's windows. The API opens a window, a toggle closes it
(the preload writes t.1), the API's stop then finds nothing open and says so; the next
window a toggle opens, the API closes (written as t.2, and kept for the API); the API's
stats add the windows it closed. Prints what it saw, as JSON."""
import json
import os
import subprocess
import sys
import warnings

import coprof


def one():
    return 1


def two():
    return 2


def toggle():
    subprocess.run(["coprof", "toggle", str(os.getpid())], check=True, capture_output=True)


warnings.simplefilter("error")
seen = {}
try:  # the preload's clock (record -c cpu) is the process's
    coprof.set_clock_type("wall")
except coprof.CoprofError as e:
    seen["clock_refused"] = "the preload's COPROF_CLOCK" in str(e)
coprof.start()
one()
toggle()  # off: the preload writes t.1 (one)
seen["after_toggle_off"] = coprof.is_running()
try:
    coprof.stop()
except RuntimeWarning as w:
    seen["stop_warned"] = str(w)
toggle()  # on
seen["after_toggle_on"] = coprof.is_running()
two()
two()
coprof.stop()  # t.2 (two, two)
s = coprof.get_func_stats()
seen["api"] = {x.name: x.ncall for x in s if x.name in ("one", "two")}
seen["files"] = sorted(f for f in os.listdir(sys.argv[1]) if f.startswith("t."))
print(json.dumps(seen, sort_keys=True))
