/* view-none.c: `coprof view` in a build without ncurses (-Dviewer=disabled): says so.
 * report, export and diff are built either way. */
#include <stdio.h>

#include "cmds.h"

int vw_cmd_view(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "coprof view: this coprof was built without ncurses (-Dviewer); "
			"use coprof report\n");
	return 2;
}
