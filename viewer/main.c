/* main.c: the coprof command: picks the subcommand and hands it the arguments. */
#include <stdio.h>
#include <string.h>

#include "cmds.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
} commands[] = {
    {"record", vw_cmd_record, "run a program under the profiler"},
    {"toggle", vw_cmd_toggle, "start or stop profiling a running process"},
    {"attach", vw_cmd_attach, "load the profiler into a running process and start"},
    {"detach", vw_cmd_detach, "stop profiling a process attached to"},
    {"view", vw_cmd_view, "browse profiles in the terminal"},
    {"report", vw_cmd_report, "print a profile as a table (text, csv, json)"},
    {"export", vw_cmd_export, "convert a profile (callgrind, collapsed, pprof)"},
    {"diff", vw_cmd_diff, "compare two profiles (text, csv)"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: coprof COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\nSee coprof(1), or coprof COMMAND --help.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("coprof %s\n", COPROF_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "coprof: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
