/* config.c: the COPROF_* environment variables (DESIGN "The preload shim"). Called
 * once by the shim's constructor, before any thread of the program runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "state.h"

static int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	if (!s[0] || s[0] == '-' || s[0] == '+' || s[0] == ' ')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int pl_parse_hz(const char *s, unsigned *out)
{
	unsigned long n;
	if (parse_uint(s, PL_HZ_MIN, PL_HZ_MAX, &n))
		return -EINVAL;
	*out = (unsigned)n;
	return 0;
}

int pl_parse_signal(const char *s)
{
	unsigned long n;
	if (!s || !s[0])
		return -EINVAL;
	if (!strcasecmp(s, "none"))
		return 0;
	if (parse_uint(s, 0, (unsigned long)SIGRTMAX, &n) == 0)
		goto check;
	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	if (!strncasecmp(s, "RTMIN", 5) || !strncasecmp(s, "RTMAX", 5)) {
		int max = !strncasecmp(s, "RTMAX", 5);
		unsigned long k = 0;
		if (s[5] && (s[5] != (max ? '-' : '+') || parse_uint(s + 6, 0, 64, &k)))
			return -EINVAL;
		long v = max ? (long)SIGRTMAX - (long)k : (long)SIGRTMIN + (long)k;
		if (v < SIGRTMIN || v > SIGRTMAX)
			return -EINVAL;
		n = (unsigned long)v;
		goto check;
	}
	for (int i = 1; i < SIGRTMIN; i++) {
		const char *abbrev = sigabbrev_np(i);
		if (abbrev && !strcasecmp(s, abbrev)) {
			n = (unsigned long)i;
			goto check;
		}
	}
	return -EINVAL;
check:
	/* Only signals that neither the kernel, libc nor a terminal sends on their own, and
	 * that programs do not rely on: USR1, USR2 and the real-time ones. INT would take
	 * Ctrl-C, CHLD or PIPE would change what the program sees, SEGV would hide a crash. */
	if (n == 0)
		return 0;
	if (n == SIGUSR1 || n == SIGUSR2 ||
	    (n >= (unsigned long)SIGRTMIN && n <= (unsigned long)SIGRTMAX))
		return (int)n;
	return -EINVAL;
}

/* The longest COPROF_OUT: a path with room for a pid and a dump number added. */
#define PL_OUT_MAX (PATH_MAX - 32)

/* The template may hold %p (pid), %n (dump number) and %% only. */
static int check_template(const char *s)
{
	if (!s[0] || strlen(s) >= PL_OUT_MAX)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p != '%')
			continue;
		p++;
		if (*p != 'p' && *p != 'n' && *p != '%')
			return -EINVAL;
	}
	return 0;
}

/* 1, 01, y, yes, on, true / 0, 00, n, no, off, false (any case). */
static int parse_bool(const char *s, int *out)
{
	unsigned long n;
	if (parse_uint(s, 0, 1, &n) == 0)
		*out = (int)n;
	else if (!strcasecmp(s, "y") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") ||
		 !strcasecmp(s, "true"))
		*out = 1;
	else if (!strcasecmp(s, "n") || !strcasecmp(s, "no") || !strcasecmp(s, "off") ||
		 !strcasecmp(s, "false"))
		*out = 0;
	else
		return -EINVAL;
	return 0;
}

/* The message quotes the value, with control characters shown as '?', so it stays one
 * line whatever the environment holds. */
static int bad(char *err, size_t errlen, const char *var, const char *val, const char *want)
{
	char shown[65];
	size_t i;
	for (i = 0; val[i] && i < sizeof(shown) - 1; i++)
		shown[i] = (unsigned char)val[i] < 0x20 || val[i] == 0x7f ? '?' : val[i];
	shown[i] = 0;
	snprintf(err, errlen, "%s='%s' is not %s; profiling is off", var, shown, want);
	return -EINVAL;
}

/* DIGITS[.DIGITS] (no sign, exponent or locale) of `unit` ns each, into ns (digits
 * past the ns are ignored), at most `max`: 0 and *out, or -EINVAL. */
static int parse_decimal(const char *s, uint64_t unit, uint64_t max, uint64_t *out)
{
	uint64_t ns = 0, scale = unit;
	const char *p = s;
	for (; *p >= '0' && *p <= '9'; p++)
		if ((ns = ns * 10 + (uint64_t)(*p - '0') * scale) > max)
			return -EINVAL;
	if (p == s && *p != '.')
		return -EINVAL;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			ns += (uint64_t)(*p - '0') * (scale /= 10);
	if (*p || ns > max)
		return -EINVAL;
	*out = ns;
	return 0;
}

/* COPROF_INTERVAL: seconds, from 10 ms to a day: shorter windows would be mostly
 * overhead. */
static int parse_interval(const char *s, uint64_t *out)
{
	uint64_t ns;
	if (parse_decimal(s, 1000000000u, 86400ull * 1000000000u, &ns) || ns < 10000000u)
		return -EINVAL;
	*out = ns;
	return 0;
}

/* COPROF_STALL_MS: milliseconds, above 0 and at most an hour. */
static int parse_stall_ms(const char *s, uint64_t *out)
{
	uint64_t ns;
	if (parse_decimal(s, 1000000u, 3600000ull * 1000000u, &ns) || !ns)
		return -EINVAL;
	*out = ns;
	return 0;
}

struct coprof_options pl_config_options(const struct pl_config *cfg)
{
	return (struct coprof_options){
	    .clock = cfg->clock,
	    .mode = cfg->mode,
	    .hz = cfg->mode == COPROF_MODE_SAMPLE ? cfg->hz : 0,
	    .stall_ns = cfg->stall_ns,
	};
}

int pl_config_parse(struct pl_config *cfg, const char *(*get)(const char *name), char *err,
		    size_t errlen)
{
	const char *v;
	unsigned long n;
	memset(cfg, 0, sizeof(*cfg));
	cfg->clock = COPROF_CLOCK_CPU;
	cfg->mode = COPROF_MODE_TRACE;
	cfg->signo = SIGUSR2;
	cfg->start = 1;
	cfg->hz = PL_DEFAULT_HZ;
	cfg->builtins = 0;
	cfg->py_hook = PL_PY_HOOK_AUTO;
	snprintf(cfg->out, sizeof(cfg->out), "coprof-%%p.pstat");
	if (err && errlen)
		err[0] = 0;

	if ((v = get("COPROF_OUT")) != NULL) {
		if (strlen(v) >= PL_OUT_MAX) {
			snprintf(err, errlen,
				 "COPROF_OUT is too long (%zu bytes; at most %d); profiling is off",
				 strlen(v), PL_OUT_MAX - 1);
			return -EINVAL;
		}
		if (v[0] && v[strlen(v) - 1] == '/')
			return bad(err, errlen, "COPROF_OUT", v,
				   "a file: it ends in '/', so it names a directory");
		if (check_template(v))
			return bad(err, errlen, "COPROF_OUT", v,
				   "a path (with %p for the pid, %n for the dump number)");
		snprintf(cfg->out, sizeof(cfg->out), "%s", v);
	}
	if ((v = get("COPROF_CLOCK")) != NULL) {
		if (!strcmp(v, "cpu"))
			cfg->clock = COPROF_CLOCK_CPU;
		else if (!strcmp(v, "wall"))
			cfg->clock = COPROF_CLOCK_WALL;
		else
			return bad(err, errlen, "COPROF_CLOCK", v, "cpu or wall");
	}
	if ((v = get("COPROF_MODE")) != NULL) {
		if (!strcmp(v, "trace"))
			cfg->mode = COPROF_MODE_TRACE;
		else if (!strcmp(v, "sample"))
			cfg->mode = COPROF_MODE_SAMPLE;
		else
			return bad(err, errlen, "COPROF_MODE", v, "trace or sample");
	}
	if ((v = get("COPROF_SIGNAL")) != NULL) {
		int s = pl_parse_signal(v);
		if (s < 0)
			return bad(
			    err, errlen, "COPROF_SIGNAL", v,
			    "a signal coprof may use (USR1, USR2, RTMIN+N, RTMAX-N, or none)");
		cfg->signo = s;
	}
	if ((v = get("COPROF_START")) != NULL && parse_bool(v, &cfg->start))
		return bad(err, errlen, "COPROF_START", v, "1 or 0 (yes or no)");
	if ((v = get("COPROF_HZ")) != NULL && pl_parse_hz(v, &cfg->hz))
		return bad(err, errlen, "COPROF_HZ", v, "a rate from 1 to 10000");
	if ((v = get("COPROF_BUILTINS")) != NULL && parse_bool(v, &cfg->builtins))
		return bad(err, errlen, "COPROF_BUILTINS", v, "1 or 0 (yes or no)");
	if ((v = get("COPROF_NATIVE")) != NULL && parse_bool(v, &cfg->native))
		return bad(err, errlen, "COPROF_NATIVE", v, "1 or 0 (yes or no)");
	if ((v = get("COPROF_PY_HOOK")) != NULL) {
		if (!strcmp(v, "auto"))
			cfg->py_hook = PL_PY_HOOK_AUTO;
		else if (!strcmp(v, "profile"))
			cfg->py_hook = PL_PY_HOOK_PROFILE;
		else if (!strcmp(v, "monitoring"))
			cfg->py_hook = PL_PY_HOOK_MONITORING;
		else if (!strcmp(v, "evalframe"))
			cfg->py_hook = PL_PY_HOOK_EVALFRAME;
		else
			return bad(err, errlen, "COPROF_PY_HOOK", v,
				   "auto, profile, monitoring or evalframe");
	}
	if ((v = get("COPROF_INTERVAL")) != NULL && parse_interval(v, &cfg->interval_ns))
		return bad(err, errlen, "COPROF_INTERVAL", v,
			   "a window length in seconds (0.01 to 86400)");
	if ((v = get("COPROF_KEEP")) != NULL) {
		if (parse_uint(v, 1, 1000000, &n))
			return bad(err, errlen, "COPROF_KEEP", v,
				   "a number of files from 1 to 1000000");
		cfg->keep = (unsigned)n;
	}
	if ((v = get("COPROF_STALL_MS")) != NULL && parse_stall_ms(v, &cfg->stall_ns))
		return bad(err, errlen, "COPROF_STALL_MS", v,
			   "a step length in milliseconds, above 0 and at most 3600000");
	if (!cfg->start && !cfg->signo) {
		snprintf(err, errlen,
			 "COPROF_START=0 with COPROF_SIGNAL=none: nothing could ever be recorded; "
			 "profiling is off");
		return -EINVAL;
	}
	return 0;
}

/* Inserts ".VALUE" before the file name's extension (or at its end). */
static int insert_suffix(char *buf, size_t len, unsigned long value)
{
	size_t o = strlen(buf);
	char *dot = strrchr(buf, '.');
	char *slash = strrchr(buf, '/');
	if (!dot || (slash && dot < slash) || dot == buf || dot[-1] == '/')
		dot = buf + o;
	char tail[PATH_MAX];
	snprintf(tail, sizeof(tail), "%s", dot);
	size_t room = len - (size_t)(dot - buf);
	int m = snprintf(dot, room, ".%lu%s", value, tail);
	return m < 0 || (size_t)m >= room ? -ENAMETOOLONG : 0;
}

int pl_out_path(const char *tmpl, long pid, unsigned n, int child, char *buf, size_t len)
{
	size_t o = 0;
	int has_n = 0, has_p = 0;
	for (const char *p = tmpl; *p; p++) {
		char tmp[24];
		const char *piece = tmp;
		if (p[0] == '%' && p[1] == 'p') {
			snprintf(tmp, sizeof(tmp), "%ld", pid);
			has_p = 1;
			p++;
		} else if (p[0] == '%' && p[1] == 'n') {
			snprintf(tmp, sizeof(tmp), "%u", n);
			has_n = 1;
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			piece = "%";
			p++;
		} else {
			tmp[0] = *p;
			tmp[1] = 0;
		}
		size_t l = strlen(piece);
		if (o + l + 1 > len)
			return -ENAMETOOLONG;
		memcpy(buf + o, piece, l);
		o += l;
	}
	buf[o] = 0;
	if (child && !has_p && insert_suffix(buf, len, (unsigned long)pid))
		return -ENAMETOOLONG;
	if (!has_n && n > 1 && insert_suffix(buf, len, n))
		return -ENAMETOOLONG;
	return 0;
}

void pl_test_pause(const char *name)
{
	const char *v = getenv(name);
	long ms = v ? atol(v) : 0;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	if (ms > 0 && ms <= 10000)
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
}
