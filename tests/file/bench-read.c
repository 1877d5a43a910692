/* bench-read: times cp_profile_read on one file; prints the median of N runs in
 * seconds. usage: bench-read FILE [N] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "profile.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 5;
	double t[64];
	char err[256];

	if (argc < 2 || n < 1 || n > 64) {
		fprintf(stderr, "usage: bench-read FILE [N<=64]\n");
		return 2;
	}
	for (int i = 0; i < n; i++) {
		struct cp_profile *p;
		double t0 = now();
		if (cp_profile_read(argv[1], &p, err, sizeof(err)) < 0) {
			fprintf(stderr, "bench-read: %s\n", err);
			return 1;
		}
		t[i] = now() - t0;
		if (i == 0)
			fprintf(stderr, "%u functions\n", p->stats.nfuncs);
		cp_profile_free(p);
	}
	qsort(t, (size_t)n, sizeof(t[0]), cmp);
	printf("%.4f\n", t[n / 2]);
	return 0;
}
