/* cmd-view.c: placeholder until its part lands. */
#include <stdio.h>

#include "cmds.h"

int vw_cmd_view(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "coprof: view is not built yet\n");
	return 2;
}
