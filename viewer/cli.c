/* cli.c: loading and option helpers shared by the commands.
 * Runs on the command's only thread; prints to stderr only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int vw_cli_finish(FILE *f, const char *cmd, const char *name)
{
	errno = 0;
	int bad = fflush(f) != 0 || ferror(f);
	int err = errno ? errno : EIO; /* ferror alone keeps no errno: say I/O error */
	if (f != stdout && fclose(f) != 0 && !bad) {
		bad = 1;
		err = errno;
	}
	if (!bad)
		return 0;
	fprintf(stderr, "coprof %s: cannot write %s: %s\n", cmd, name, strerror(err));
	return 2;
}

int vw_cli_opt(int argc, char **argv, const char *shortopts, const struct option *opts,
	       void (*usage)(FILE *f), int *status)
{
	int c = getopt_long(argc, argv, shortopts, opts, NULL);
	if (c == 'h' || c == '?' || c == ':') {
		usage(c == 'h' ? stdout : stderr);
		*status = c == 'h' ? 0 : 2;
		return -1;
	}
	return c;
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
