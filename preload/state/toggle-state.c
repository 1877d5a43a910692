/* toggle-state.c: the control thread's name, which publishes the toggle state to
 * `coprof toggle` (state.h). Pure code, built into the shim and into coprof. */
#include <errno.h>
#include <string.h>

#include "state.h"

static const char digits36[] = "0123456789abcdefghijklmnopqrstuvwxyz";

static void put36(char *p, int width, unsigned v)
{
	for (int i = width - 1; i >= 0; i--) {
		p[i] = digits36[v % 36];
		v /= 36;
	}
}

static int get36(const char *p, int width, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < width; i++) {
		const char *d = p[i] ? strchr(digits36, p[i]) : NULL;
		if (!d)
			return -EINVAL;
		v = v * 36 + (unsigned)(d - digits36);
	}
	*out = v;
	return 0;
}

void pl_toggle_state_format(const struct pl_toggle_state *st, char buf[16])
{
	int sig = st->signo > 0 && st->signo < 100 ? st->signo : 0;
	memcpy(buf, PL_TS_PREFIX, 6);
	buf[6] = (char)('0' + sig / 10);
	buf[7] = (char)('0' + sig % 10);
	buf[8] = (char)(st->forked ? st->run - 'A' + 'a' : st->run);
	put36(buf + 9, 2, st->seq % PL_TS_SEQ_MOD);
	put36(buf + 11, 4, st->dumps % PL_TS_DUMPS_MOD);
	buf[15] = 0;
}

int pl_toggle_state_parse(const char *name, struct pl_toggle_state *st)
{
	size_t n = strlen(name);
	if (n == PL_TS_LEN + 1 && name[PL_TS_LEN] == '\n')
		n--;
	if (n != PL_TS_LEN || memcmp(name, PL_TS_PREFIX, 6) != 0)
		return -EINVAL;
	if (name[6] < '0' || name[6] > '9' || name[7] < '0' || name[7] > '9')
		return -EINVAL;
	int run = name[8], forked = 0;
	if (run >= 'a' && run <= 'z') {
		forked = 1;
		run = run - 'a' + 'A';
	}
	if (!strchr("RSEFX", run) || !run)
		return -EINVAL;
	struct pl_toggle_state s = {
	    .signo = (name[6] - '0') * 10 + (name[7] - '0'),
	    .run = run,
	    .forked = forked,
	};
	if (get36(name + 9, 2, &s.seq) || get36(name + 11, 4, &s.dumps))
		return -EINVAL;
	*st = s;
	return 0;
}
