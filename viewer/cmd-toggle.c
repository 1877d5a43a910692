/* cmd-toggle.c: `coprof toggle [--signal SIG] PID...`: starts or stops profiling in
 * processes running under the preload shim, by sending the toggle signal. The signal
 * is --signal, else the target's own COPROF_SIGNAL (from /proc/PID/environ), else USR2. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmds.h"

int vw_parse_signal(const char *s)
{
	char *end;
	long n = strtol(s, &end, 10);
	if (!*s)
		return -1;
	if (*end) {
		n = -1;
		if (!strncasecmp(s, "SIG", 3))
			s += 3;
		for (int i = 1; i < SIGRTMIN; i++) {
			const char *abbrev = sigabbrev_np(i);
			if (abbrev && !strcasecmp(s, abbrev))
				n = i;
		}
		if (!strncasecmp(s, "RTMIN", 5)) {
			long k = s[5] == '+' ? strtol(s + 6, &end, 10) : 0;
			n = (s[5] && (s[5] != '+' || *end)) ? -1 : SIGRTMIN + k;
		}
	}
	if (n <= 0 || n > SIGRTMAX || n == SIGKILL || n == SIGSTOP || n == SIGSEGV || n == SIGBUS ||
	    n == SIGILL || n == SIGFPE || n == SIGABRT || n == SIGTRAP || (n >= 32 && n < SIGRTMIN))
		return -1;
	return (int)n;
}

/* COPROF_SIGNAL from the target's environment, as it was when it started. */
static int target_signal(long pid)
{
	char path[64], buf[65536];
	snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
		if (!strncmp(buf + i, "COPROF_SIGNAL=", 14))
			return vw_parse_signal(buf + i + 14);
	return -1;
}

int vw_cmd_toggle(int argc, char **argv)
{
	int sig = -1, i = 1, status = 0;
	if (i < argc && (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))) {
		printf("usage: coprof toggle [--signal SIG] PID...\n"
		       "Starts or stops profiling in each PID (run under coprof record or the\n"
		       "preload library); each stop writes the next numbered profile.\n");
		return 0;
	}
	if (i + 1 < argc && !strcmp(argv[i], "--signal")) {
		sig = vw_parse_signal(argv[i + 1]);
		if (sig < 0) {
			fprintf(stderr, "coprof toggle: '%s' is not a signal coprof can use\n",
				argv[i + 1]);
			return 2;
		}
		i += 2;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: coprof toggle [--signal SIG] PID...\n");
		return 2;
	}
	for (; i < argc; i++) {
		char *end;
		long pid = strtol(argv[i], &end, 10);
		if (*end || pid <= 0) {
			fprintf(stderr, "coprof toggle: '%s' is not a pid\n", argv[i]);
			return 2;
		}
		int s = sig > 0 ? sig : target_signal(pid);
		if (s <= 0)
			s = SIGUSR2;
		if (kill((pid_t)pid, s) != 0) {
			fprintf(stderr, "coprof toggle: %ld: %s\n", pid, strerror(errno));
			status = 1;
		}
	}
	return status;
}
