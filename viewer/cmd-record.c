/* cmd-record.c: placeholder until its part lands. */
#include <stdio.h>

#include "cmds.h"

int vw_cmd_record(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "coprof: record is not built yet\n");
	return 2;
}
