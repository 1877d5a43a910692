/* open-phases.c: where the time to open a profile in `coprof view` goes: reading the
 * file (the file layer's cp_profile_read), building the function table (vw_table_build)
 * and sorting it for the first screen (vw_table_select). CPU time of this process per
 * phase, median of 5 rounds. usage: open-phases FILE */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "model.h"

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	enum { ROUNDS = 5 };
	double t[3][ROUNDS];
	if (argc != 2) {
		fprintf(stderr, "usage: open-phases FILE\n");
		return 2;
	}
	for (int r = 0; r < ROUNDS; r++) {
		char err[256];
		struct cp_profile *p;
		struct vw_table tab;
		double t0 = cpu_now();
		if (cp_profile_read(argv[1], &p, err, sizeof(err))) {
			fprintf(stderr, "open-phases: %s\n", err);
			return 2;
		}
		double t1 = cpu_now();
		const struct cp_stats *st = &p->stats;
		if (vw_table_build(&tab, &st, 1))
			return 1;
		double t2 = cpu_now();
		uint32_t *rows = malloc((tab.nfuncs + 1) * sizeof(*rows));
		struct vw_query q = {VW_SORT_TTOT, 0, NULL};
		if (!rows)
			return 1;
		vw_table_select(&tab, &q, rows);
		double t3 = cpu_now();
		t[0][r] = t1 - t0;
		t[1][r] = t2 - t1;
		t[2][r] = t3 - t2;
		free(rows);
		vw_table_free(&tab);
		cp_profile_free(p);
	}
	static const char *const names[] = {"read (cp_profile_read)", "table (vw_table_build)",
					    "sort (vw_table_select)"};
	for (int i = 0; i < 3; i++) {
		qsort(t[i], ROUNDS, sizeof(double), by_value);
		printf("%-24s cpu median %.3f s\n", names[i], t[i][ROUNDS / 2]);
	}
	return 0;
}
