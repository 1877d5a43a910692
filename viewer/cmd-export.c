/* cmd-export.c: placeholder until its part lands. */
#include <stdio.h>

#include "cmds.h"

int vw_cmd_export(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "coprof: export is not built yet\n");
	return 2;
}
