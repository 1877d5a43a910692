"""recipe_times.py yappi|coprof RECIPE NAME...: runs a recipe of recipes/ (written with
`import coprof as yappi`) under coprof or, with that import answered by yappi, under
yappi itself; then prints, as the last line, JSON of each named function's ncall, ttot
and tsub (by its last dotted part: 3.10 names by co_name). For tests/pip/run.py and
bench/python/api.py."""
import json
import runpy
import sys

if sys.argv[1] == "yappi":
    import yappi
    sys.modules["coprof"] = yappi
import coprof  # noqa: E402 (yappi itself when asked)

runpy.run_path(sys.argv[2], run_name="__main__")
names = set(sys.argv[3:])
print(json.dumps({s.name.split(".")[-1]: [s.ncall, s.ttot, s.tsub]
                  for s in coprof.get_func_stats() if s.name.split(".")[-1] in names}))
