#!/usr/bin/env bash
# Assembles man/coprof.1 from its frame and each part's fragment in doc/man-*.roff.
set -euo pipefail
cd "$(dirname "$0")/.."
{
	cat man/coprof.1.in
	for part in native sample python viewer clocks file; do
		[ -f "doc/man-$part.roff" ] && cat "doc/man-$part.roff"
	done
	cat man/coprof.1.tail
} >man/coprof.1
