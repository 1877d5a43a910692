/* cmd-report.c: placeholder until its part lands. */
#include <stdio.h>

#include "cmds.h"

int vw_cmd_report(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "coprof: report is not built yet\n");
	return 2;
}
