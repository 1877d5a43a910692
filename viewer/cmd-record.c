/* cmd-record.c: `coprof record [OPTIONS] -- CMD ARGS...`: runs CMD under the preload
 * shim. Finds libcoprof-preload.so beside its own install (or in the build tree), puts
 * the options into the COPROF_* environment and execs CMD, so CMD keeps this process's
 * pid (for `coprof toggle`) and its exit status is the command's. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmds.h"
#include "target.h"
#include "state/state.h"

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#else
#define MULTIARCH "."
#endif

#define PRELOAD_NAME "libcoprof-preload.so"

static void usage(FILE *f)
{
	fprintf(f, "usage: coprof record [-o FILE] [-c cpu|wall] [--mode trace|sample] [--hz N]\n"
		   "                     [--native] [--no-start] [--signal SIG] [--interval SECS]\n"
		   "                     [--keep N]\n"
		   "                     -- CMD [ARGS...]\n"
		   "  -o, --output FILE  profile path; %%p: pid, %%n: dump number\n"
		   "  -c, --clock CLOCK  cpu (default) or wall\n"
		   "  --mode MODE        trace (default, -finstrument-functions) or sample\n"
		   "  --hz N             sampling rate in sample mode (default 99)\n"
		   "  --native           sample mode in CPython: C frames too, the eval loop's\n"
		   "                     replaced by its Python frames (COPROF_NATIVE)\n"
		   "  --no-start         wait for the toggle signal before profiling\n"
		   "  --signal SIG       toggle signal (default USR2): see coprof toggle\n"
		   "  --interval SECS    while profiling, write a window every SECS seconds\n"
		   "                     (numbered with %%n; COPROF_INTERVAL)\n"
		   "  --keep N           keep only the newest N files (COPROF_KEEP)\n");
}

/* The preload library: $COPROF_PRELOAD, else the build tree beside this binary, else
 * the install's libdir. Returns 0 and fills out, or -1. */
int vw_find_preload(char *out, size_t len)
{
	const char *env = getenv("COPROF_PRELOAD");
	if (env && *env) {
		snprintf(out, len, "%s", env);
		return access(out, R_OK) == 0 ? 0 : -1;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = 0;
	const char *rel[] = {
	    "../preload", /* build tree: build/viewer/coprof */
#ifdef COPROF_LIBDIR
	    COPROF_LIBDIR,
#endif
	    ("../lib/" MULTIARCH), "../lib64", "../lib",
	};
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		int w;
		if (rel[i][0] == '/')
			w = snprintf(out, len, "%s/%s", rel[i], PRELOAD_NAME);
		else
			w = snprintf(out, len, "%s/%s/%s", exe, rel[i], PRELOAD_NAME);
		if (w < 0 || (size_t)w >= len)
			continue;
		char real[PATH_MAX];
		if (access(out, R_OK) == 0 && realpath(out, real)) {
			snprintf(out, len, "%s", real);
			return 0;
		}
	}
	return -1;
}

static int setenv_or_die(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0) {
		perror("coprof: setenv");
		return -1;
	}
	return 0;
}

int vw_cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"clock", required_argument, NULL, 'c'},
	    {"mode", required_argument, NULL, 'm'},
	    {"hz", required_argument, NULL, 'z'},
	    {"no-start", no_argument, NULL, 'n'},
	    {"signal", required_argument, NULL, 's'},
	    {"interval", required_argument, NULL, 'i'},
	    {"keep", required_argument, NULL, 'k'},
	    {"native", no_argument, NULL, 'N'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *interval = NULL, *keep = NULL;
	const char *out = NULL, *clock = NULL, *mode = NULL, *hz = NULL, *sig = NULL;
	int no_start = 0, native = 0, done = -1, c;
	optind = 1;
	while ((c = vw_cli_opt(argc, argv, "+o:c:h", opts, usage, &done)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'c':
			clock = optarg;
			break;
		case 'm':
			mode = optarg;
			break;
		case 'z':
			hz = optarg;
			break;
		case 'n':
			no_start = 1;
			break;
		case 'N':
			native = 1;
			break;
		case 's':
			sig = optarg;
			break;
		case 'i':
			interval = optarg;
			break;
		case 'k':
			keep = optarg;
			break;
		}
	}
	if (done >= 0)
		return done;
	if (optind >= argc) {
		fprintf(stderr, "coprof record: no command to run\n");
		usage(stderr);
		return 2;
	}
	if (clock && strcmp(clock, "cpu") && strcmp(clock, "wall")) {
		fprintf(stderr, "coprof record: clock '%s' is not cpu or wall\n", clock);
		return 2;
	}
	if (mode && strcmp(mode, "trace") && strcmp(mode, "sample")) {
		fprintf(stderr, "coprof record: mode '%s' is not trace or sample\n", mode);
		return 2;
	}
	unsigned rate;
	if (hz && pl_parse_hz(hz, &rate) != 0) {
		fprintf(stderr, "coprof record: --hz '%s' is not a rate from 1 to 10000\n", hz);
		return 2;
	}
	if (sig && pl_parse_signal(sig) < 0) {
		fprintf(stderr,
			"coprof record: '%s' is not a signal coprof may use (USR1, USR2, RTMIN+N, "
			"RTMAX-N, none)\n",
			sig);
		return 2;
	}
	if (sig && no_start && pl_parse_signal(sig) == 0) {
		fprintf(stderr, "coprof record: --no-start with --signal none: nothing could ever "
				"be recorded\n");
		return 2;
	}
	char lib[PATH_MAX];
	if (vw_find_preload(lib, sizeof(lib)) != 0) {
		fprintf(stderr, "coprof record: cannot find " PRELOAD_NAME
				" (set COPROF_PRELOAD to its path)\n");
		return 2;
	}
	/* after what is preloaded already: a sanitizer's runtime must stay first */
	const char *old = getenv("LD_PRELOAD");
	char preload[2 * PATH_MAX];
	int w = old && *old && !strstr(old, PRELOAD_NAME)
		    ? snprintf(preload, sizeof(preload), "%s:%s", old, lib)
		    : snprintf(preload, sizeof(preload), "%s", lib);
	if (w < 0 || (size_t)w >= sizeof(preload)) {
		fprintf(stderr, "coprof record: LD_PRELOAD is too long\n");
		return 2;
	}
	char pid[24];
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	if (setenv_or_die("LD_PRELOAD", preload) || setenv_or_die("COPROF_PID", pid) ||
	    (out && setenv_or_die("COPROF_OUT", out)) ||
	    (clock && setenv_or_die("COPROF_CLOCK", clock)) ||
	    (mode && setenv_or_die("COPROF_MODE", mode)) ||
	    (hz && setenv_or_die("COPROF_HZ", hz)) ||
	    (sig && setenv_or_die("COPROF_SIGNAL", sig)) ||
	    (no_start && setenv_or_die("COPROF_START", "0")) ||
	    (native && setenv_or_die("COPROF_NATIVE", "1")) ||
	    (interval && setenv_or_die("COPROF_INTERVAL", interval)) ||
	    (keep && setenv_or_die("COPROF_KEEP", keep)))
		return 2;
	execvp(argv[optind], argv + optind);
	/* as shells do: 127 when there is no such command, 126 when it cannot be run */
	int err = errno;
	fprintf(stderr, "coprof record: cannot run %s: %s\n", argv[optind], strerror(err));
	return err == ENOENT || err == ENOTDIR ? 127 : 126;
}
