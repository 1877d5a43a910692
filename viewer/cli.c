/* cli.c: loading and option helpers shared by the report, export and diff commands.
 * Runs on the command's only thread; prints to stderr only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int vw_cli_load(struct vw_model *m, const char *cmd, char *const *paths, int n)
{
	char err[512];
	if (vw_model_load(m, paths, n, err, sizeof(err))) {
		fprintf(stderr, "coprof %s: %s\n", cmd, err);
		return 2;
	}
	return 0;
}

int vw_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}
