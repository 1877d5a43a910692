/* cmd-detach.c: `coprof detach PID`: stops profiling a process `coprof attach` loaded
 * the shim into (or any process running the shim with a control thread), writing the
 * window, and leaves it running at full speed. The shim stays loaded, idle: unloading
 * it would race with its own threads and with code the program may still return to. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "target.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: coprof detach PID\n"
		   "Stops profiling PID (writing the window, as a toggle that stops does) and\n"
		   "leaves it running at full speed: the profiler stays loaded, idle (no hook, no\n"
		   "tick), and `coprof attach` or `coprof toggle` starts it again.\n");
}

int vw_cmd_detach(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	vw_toggle_who = "coprof detach";
	optind = 1;
	opterr = 0;
	if (argc == 2 && argv[1][0] == '-' && argv[1][1] >= '0' && argv[1][1] <= '9') {
		fprintf(stderr, "coprof detach: '%s' is not a pid\n", argv[1]);
		return 2;
	}
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		fprintf(stderr, "coprof detach: unknown option '%s'\n", argv[optind - 1]);
		usage(stderr);
		return 2;
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	struct vw_target t = {.pid = vw_parse_pid(argv[optind])};
	if (t.pid <= 0) {
		fprintf(stderr, "coprof detach: '%s' is not a pid\n", argv[optind]);
		return 2;
	}
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/%d/status", (int)t.pid);
	if (access(proc, F_OK) != 0) {
		fprintf(stderr, "coprof detach: %d: no such process\n", (int)t.pid);
		return 2;
	}
	if (vw_shim_mapped(t.pid) != 1 || vw_find_control(&t) != 0) {
		fprintf(stderr,
			"coprof detach: %d: the profiler is not loaded in it (or it has no control "
			"thread); nothing to detach\n",
			(int)t.pid);
		return 2;
	}
	if (t.st.run != PL_RUN_ON) {
		printf("%d: not profiling; the profiler stays loaded, idle\n", (int)t.pid);
		return 0;
	}
	int rc = vw_send_and_wait(&t, PL_REQ_STOP, 30);
	if (rc == 0)
		printf("%d: detached; the profiler stays loaded, idle (no hook, no tick)\n",
		       (int)t.pid);
	return rc;
}
