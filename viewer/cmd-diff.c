/* cmd-diff.c: placeholder until its part lands. */
#include <stdio.h>

#include "cmds.h"

int vw_cmd_diff(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "coprof: diff is not built yet\n");
	return 2;
}
