/* fuzz-pstat.c: libFuzzer target for the pstats reader (libprof/pstat-read.c and
 * marshal.c). Any input must give a profile or an error with a message; a profile
 * read must encode again and read back, never growing. Built with -Dfuzz=true. */
#include <stdint.h>
#include <stdlib.h>

#include "profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cp_profile *p, *q;
	unsigned char *buf;
	size_t len;
	char err[256] = "";
	int r;

	r = cp_profile_read_mem(data, size, &p, err, sizeof(err));
	if (r < 0) {
		if (err[0] == '\0' || p != NULL)
			abort();
		return 0;
	}
	/* Equal strings after NUL truncation or UTF-8 repair may merge: never more. */
	if (cp_profile_encode(p, &buf, &len) < 0)
		abort();
	if (cp_profile_read_mem(buf, len, &q, err, sizeof(err)) < 0)
		abort();
	if (q->stats.nfuncs > p->stats.nfuncs || q->ex.present != 1 ||
	    q->ex.ntasks != p->ex.ntasks || q->ex.nstacks != p->ex.nstacks)
		abort();
	free(buf);
	cp_profile_free(q);
	cp_profile_free(p);
	return 0;
}
