/* attach-none.c: `coprof attach` where the attach trampoline (inject-x86_64.S) has no
 * port: one line, and nothing done. (`coprof detach` drives any process that has the
 * shim, preloaded.) */
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "cmds.h"
#include "target.h"

static int none(const char *name)
{
	fprintf(stderr, "coprof %s: attaching is supported on x86-64 only\n", name);
	return 2;
}

int vw_cmd_attach(int argc, char **argv)
{
	(void)argc, (void)argv;
	return none("attach");
}

int vw_control_request(pid_t pid, int req)
{
	(void)pid, (void)req;
	return -1;
}

int vw_attached_out(pid_t pid, char *buf, size_t len)
{
	(void)pid, (void)buf, (void)len;
	return -1;
}
