#!/usr/bin/env bash
# meson install, staged with --destdir: the engine library, its header, the pkg-config
# file, the man pages, the preload shim, coprof-keeper and the CPython adapters land
# in place; a program builds against the installed header and library through
# pkg-config; and the
# installed `coprof record` finds the installed shim (beside its own install) and
# profiles a sample.
# usage: check-install.sh BUILD_DIR SAMPLE
set -euo pipefail
build=$1 sample=$2
dest=$(mktemp -d /tmp/coprof-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --no-rebuild >/dev/null

fail() {
	echo "FAIL install: $*" >&2
	exit 1
}
find_one() {
	local f
	f=$(find "$dest" -type f -path "*/$1" | head -n 1)
	[ -n "$f" ] || fail "$1 is not installed"
	echo "$f"
}
header=$(find_one coprof.h)
pc=$(find_one coprof.pc)
lib=$(find_one 'libcoprof.so.*')
shim=$(find_one libcoprof-preload.so)
bin=$(find_one bin/coprof)
find_one coprof.1 >/dev/null
find_one libcoprof.3 >/dev/null
[ -x "$bin" ] || fail "$bin is not executable"
# coprof-keeper, which the shim starts for a process that drops its privileges, where
# the shim looks for it: LIBDIR/coprof/, beside the shim's own LIBDIR
keeper=$(find_one coprof/coprof-keeper)
[ -x "$keeper" ] && [ "$(dirname "$(dirname "$keeper")")" = "$(dirname "$shim")" ] ||
	fail "coprof-keeper is not installed in $(dirname "$shim")/coprof/"
# The page in a variable first: under pipefail, `man | grep -q` fails whenever grep
# stops reading before man has written all (SIGPIPE), as it did once under load.
page=$(man -l "$(find_one coprof.1)" 2>/dev/null) || page=""
grep -q 'COPROF_OUT' <<<"$page" || fail "coprof(1) does not document COPROF_OUT"

# A program built against the installed files only.
libdir=$(dirname "$lib")
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$dest
cat >"$dest/prog.c" <<'C'
#include <coprof.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	struct coprof_options opt = {.clock = COPROF_CLOCK_WALL};
	struct coprof *p;
	struct coprof_thread *t;
	if (argc < 2 || coprof_create(&opt, &p) || coprof_thread_register(p, "main", &t) ||
	    coprof_start(p))
		return 1;
	for (int i = 0; i < 3; i++) {
		coprof_enter(t, 0x1000);
		coprof_leave(t, 0x1000);
	}
	coprof_stop(p);
	int rc = coprof_dump(p, argv[1]);
	printf("dump: %s\n", coprof_strerror(rc));
	return rc != 0;
}
C
# shellcheck disable=SC2046
cc -o "$dest/prog" "$dest/prog.c" $(pkg-config --cflags --libs coprof) ||
	fail "cannot build against the installed header and library"
LD_LIBRARY_PATH=$libdir "$dest/prog" "$dest/api.pstat" || fail "the API program failed"
python3 -c "
import pstats, sys
s = pstats.Stats(sys.argv[1]).stats
# The program's one function, plus the whole-program tree's root and thread node.
assert [v[1] for k, v in s.items() if k[1] or not k[2].startswith('<')] == [3], s
assert s[('~', 0, '<whole program>')][3] > 0, s
" "$dest/api.pstat" || fail "pstats does not read the API program's dump"

# The installed launcher finds the installed shim beside its own install.
LD_LIBRARY_PATH=$libdir env -u COPROF_PRELOAD "$bin" record -o "$dest/sched.pstat" -- "$sample" >/dev/null ||
	fail "coprof record failed"
python3 -c "
import pstats, sys
names = {k[2] for k in pstats.Stats(sys.argv[1]).stats}
assert 'burn_cpu' in names, names
" "$dest/sched.pstat" || fail "the installed shim wrote no usable profile"
echo "ok install: $(find "$dest" -type f | wc -l) files; API and record work from the install"
