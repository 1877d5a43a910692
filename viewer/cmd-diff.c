/* cmd-diff.c: `coprof diff A B`: per function (matched by pstats key), the change in
 * tsub, ttot and ncall from A to B, largest change first, as pyperf compare_to does for
 * benchmarks. Reads both files through the model; writes stdout; single-threaded. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"
#include "fmt.h"
#include "model.h"

/* One function on either side; a side where it is missing reads as zeros. */
struct row {
	const struct cp_key *key;
	struct cp_stat a, b;
	int ina, inb;  /* present in A, in B */
	double weight; /* what the rows are sorted by, largest first */
};

enum by { BY_ANY, BY_TSUB, BY_TTOT, BY_NCALL };

static void usage(FILE *f)
{
	fprintf(f, "usage: coprof diff A B [--sort change|tsub|ttot|ncall] [--limit N] "
		   "[--format text|csv]\n"
		   "Compares profile B against profile A per function. Exit status: 0 the same,\n"
		   "1 they differ, 2 trouble.\n");
}

static double weight(enum by by, const struct cp_stat *a, const struct cp_stat *b)
{
	double dtt = fabs(b->tt - a->tt), dct = fabs(b->ct - a->ct);
	switch (by) {
	case BY_TSUB:
		return dtt;
	case BY_TTOT:
		return dct;
	case BY_NCALL:
		return fabs((double)b->nc - (double)a->nc);
	default:
		return dtt > dct ? dtt : dct;
	}
}

static int row_cmp(const void *x, const void *y)
{
	const struct row *a = x, *b = y;
	if (a->weight != b->weight)
		return a->weight < b->weight ? 1 : -1;
	int c = strcmp(a->key->name, b->key->name);
	return c ? c : strcmp(a->key->file, b->key->file);
}

static int same(const struct cp_stat *a, const struct cp_stat *b)
{
	return a->nc == b->nc && a->cc == b->cc && a->tt == b->tt && a->ct == b->ct;
}

/* pyperf's wording for B against A, on ttot. */
static void verdict(char *buf, size_t len, int ina, int inb, double a, double b)
{
	if (!ina)
		snprintf(buf, len, "new");
	else if (!inb)
		snprintf(buf, len, "gone");
	else if (a == b)
		snprintf(buf, len, "same");
	else if (a <= 0 || b <= 0)
		snprintf(buf, len, "%s", b > a ? "slower" : "faster");
	else
		snprintf(buf, len, "%.2fx %s", b > a ? b / a : a / b, b > a ? "slower" : "faster");
}

static void print_text(const struct row *rows, uint32_t n, const struct vw_model *ma,
		       const struct vw_model *mb, const char *pa, const char *pb)
{
	char v[48];
	verdict(v, sizeof(v), 1, 1, ma->funcs.total_tt, mb->funcs.total_tt);
	printf("A: %s\nB: %s\nTotal tsub: %.6f s -> %.6f s: %s\n", vw_shown(pa), vw_shown(pb),
	       ma->funcs.total_tt, mb->funcs.total_tt, v);
	printf("Calls: %" PRIu64 " -> %" PRIu64 "\n\n", ma->funcs.total_nc, mb->funcs.total_nc);
	int namew = 4;
	for (uint32_t i = 0; i < n; i++) {
		int l = (int)strlen(vw_shown(rows[i].key->name));
		namew = l > namew ? (l > 40 ? 40 : l) : namew;
	}
	printf("%-*s  %9s  %9s  %10s  %9s  %9s  %10s  %9s  %9s  %10s  %-13s  %s\n", namew, "name",
	       "tsub A", "tsub B", "d tsub", "ttot A", "ttot B", "d ttot", "ncall A", "ncall B",
	       "d ncall", "ttot change", "file:line");
	for (uint32_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		char name[256], ta[16], tb[16], dt[16], ca[16], cb[16], dc[16], where[1200];
		vw_fit(name, sizeof(name), vw_shown(r->key->name), namew, 0);
		vw_fmt_time(ta, sizeof(ta), r->a.tt, 9);
		vw_fmt_time(tb, sizeof(tb), r->b.tt, 9);
		vw_fmt_time(ca, sizeof(ca), r->a.ct, 9);
		vw_fmt_time(cb, sizeof(cb), r->b.ct, 9);
		vw_fmt_time(dt + 1, sizeof(dt) - 1, fabs(r->b.tt - r->a.tt), 9);
		dt[0] = r->b.tt >= r->a.tt ? '+' : '-';
		vw_fmt_time(dc + 1, sizeof(dc) - 1, fabs(r->b.ct - r->a.ct), 9);
		dc[0] = r->b.ct >= r->a.ct ? '+' : '-';
		vw_fmt_where(where, sizeof(where), r->key);
		verdict(v, sizeof(v), r->ina, r->inb, r->a.ct, r->b.ct);
		int pad = namew - (int)strlen(name);
		for (const char *p = name; *p; p++)
			pad += ((unsigned char)*p & 0xc0) == 0x80;
		printf("%s%*s  %9s  %9s  %10s  %9s  %9s  %10s  %9" PRIu64 "  %9" PRIu64
		       "  %+10" PRId64 "  %-13s  %s\n",
		       name, pad > 0 ? pad : 0, "", ta, tb, dt, ca, cb, dc, r->a.nc, r->b.nc,
		       (int64_t)(r->b.nc - r->a.nc), v, where);
	}
}

static void print_csv(const struct row *rows, uint32_t n)
{
	printf("name,file,line,tsub_a,tsub_b,tsub_delta,ttot_a,ttot_b,ttot_delta,ncall_a,"
	       "ncall_b,ncall_delta\n");
	for (uint32_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		vw_put_csv(stdout, r->key->name);
		printf(",");
		vw_put_csv(stdout, r->key->file);
		printf(",%" PRIu64 ",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%" PRIu64 ",%" PRIu64 ",%" PRId64
		       "\n",
		       r->key->line, r->a.tt, r->b.tt, r->b.tt - r->a.tt, r->a.ct, r->b.ct,
		       r->b.ct - r->a.ct, r->a.nc, r->b.nc, (int64_t)(r->b.nc - r->a.nc));
	}
}

int vw_cmd_diff(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"sort", required_argument, NULL, 's'},
	    {"limit", required_argument, NULL, 'l'},
	    {"format", required_argument, NULL, 'F'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	enum by by = BY_ANY;
	uint64_t limit = 0;
	int csv = 0, done = -1, c;
	optind = 1;
	while ((c = vw_cli_opt(argc, argv, "s:l:F:h", opts, usage, &done)) != -1) {
		switch (c) {
		case 's':
			if (!strcmp(optarg, "change"))
				by = BY_ANY;
			else if (!strcmp(optarg, "tsub"))
				by = BY_TSUB;
			else if (!strcmp(optarg, "ttot"))
				by = BY_TTOT;
			else if (!strcmp(optarg, "ncall"))
				by = BY_NCALL;
			else {
				fprintf(stderr, "coprof diff: unknown sort '%s'\n", optarg);
				return 2;
			}
			break;
		case 'l':
			if (vw_parse_u64(optarg, &limit)) {
				fprintf(stderr, "coprof diff: --limit wants a number, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'F':
			if (strcmp(optarg, "text") && strcmp(optarg, "csv")) {
				fprintf(stderr, "coprof diff: unknown format '%s'\n", optarg);
				return 2;
			}
			csv = !strcmp(optarg, "csv");
			break;
		}
	}
	if (done >= 0)
		return done;
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	struct vw_model ma, mb;
	if (vw_cli_load(&ma, "diff", argv + optind, 1))
		return 2;
	if (vw_cli_load(&mb, "diff", argv + optind + 1, 1)) {
		vw_model_free(&ma);
		return 2;
	}
	const struct vw_table *ta = &ma.funcs, *tb = &mb.funcs;
	struct row *rows = calloc((size_t)ta->nfuncs + tb->nfuncs + 1, sizeof(*rows));
	if (!rows) {
		fprintf(stderr, "coprof diff: out of memory\n");
		vw_model_free(&ma);
		vw_model_free(&mb);
		return 2;
	}
	uint32_t n = 0;
	int differ = 0;
	for (uint32_t i = 0; i < ta->nfuncs; i++) {
		struct row *r = &rows[n++];
		r->key = &ta->funcs[i].key;
		r->a = ta->funcs[i].s;
		r->ina = 1;
		int64_t j = vw_table_find(tb, r->key);
		r->inb = j >= 0;
		if (j >= 0)
			r->b = tb->funcs[j].s;
		differ |= j < 0 || !same(&r->a, &r->b);
	}
	for (uint32_t j = 0; j < tb->nfuncs; j++)
		if (vw_table_find(ta, &tb->funcs[j].key) < 0) {
			rows[n].key = &tb->funcs[j].key;
			rows[n].inb = 1;
			rows[n++].b = tb->funcs[j].s;
			differ = 1;
		}
	for (uint32_t i = 0; i < n; i++)
		rows[i].weight = weight(by, &rows[i].a, &rows[i].b);
	qsort(rows, n, sizeof(*rows), row_cmp);
	uint32_t shown = limit && limit < n ? (uint32_t)limit : n;
	if (csv)
		print_csv(rows, shown);
	else
		print_text(rows, shown, &ma, &mb, argv[optind], argv[optind + 1]);
	free(rows);
	vw_model_free(&ma);
	vw_model_free(&mb);
	if (vw_cli_finish(stdout, "diff", "the comparison"))
		return 2;
	return differ;
}
