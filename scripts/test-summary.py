#!/usr/bin/env python3
"""Sums the results meson recorded in each build directory's testlog.json and prints
one closing line, 'N passed, N failed, N skipped', for the whole suite. Each test that did
not pass is named first, with the last lines it printed (its reason, as the test says
it), so a log cut short to its tail still says which and why."""
import json
import sys

TAIL = 6  # lines of each failed test's output

passed = failed = skipped = 0
bad = []
for d in sys.argv[1:]:
    try:
        f = open(f"{d}/meson-logs/testlog.json")
    except OSError:
        failed += 1  # a build whose tests never ran is a failure, not a pass
        print(f"test-summary: no test log in {d}", file=sys.stderr)
        continue
    with f:
        for line in f:
            test = json.loads(line)
            result = test["result"]
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
                bad.append(f"{result} {d}: {test['name']} ({test.get('duration', 0):.1f} s)")
                out = (test.get("stdout") or "").rstrip().splitlines()[-TAIL:]
                bad.extend("    " + l[:300] for l in out)
for line in bad:
    print(line)
print(f"{passed} passed, {failed} failed, {skipped} skipped")
