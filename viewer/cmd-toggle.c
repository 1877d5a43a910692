/* cmd-toggle.c: placeholder until its part lands. */
#include <stdio.h>

#include "cmds.h"

int vw_cmd_toggle(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "coprof: toggle is not built yet\n");
	return 2;
}
