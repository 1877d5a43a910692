"""python -m coprof ARGS: the package's `coprof` command (record, report, view, export,
diff, toggle), exactly as the `coprof` script pip puts on PATH."""
from . import main

main()
