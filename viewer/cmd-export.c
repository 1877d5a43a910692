/* cmd-export.c: `coprof export FILE --format callgrind|collapsed -o OUT`: callgrind
 * profile data (callgrind_annotate, kcachegrind) from the merged function table, or
 * folded stacks (flame graphs) from a sampled profile's stacks. Single-threaded. */
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
#include "export-pprof.h"
#include "model.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: coprof export FILE... --format callgrind|collapsed [--from-edges] -o OUT\n"
		"       coprof export FILE... --format pprof -o OUT.pb.gz\n"
		"  callgrind: costs in ns (event \"ns\"); calls lines carry inclusive cost.\n"
		"  collapsed: folded stacks from a sampled profile (one line per stack,\n"
		"             count = samples); --from-edges derives caller;callee pairs from\n"
		"             a traced profile instead (tsub in us per edge, not true stacks).\n"
		"  pprof:     gzipped profile.proto (go tool pprof, Pyroscope, Parca): sampled\n"
		"             stacks labelled thread and task; from a traced profile,\n"
		"             caller;callee pairs and own times.\n"
		"  -o, --output OUT: the file to write; \"-\" is stdout.\n");
}

static uint64_t ns(double s)
{
	return s > 0 && isfinite(s) ? (uint64_t)llround(s * 1e9) : 0;
}

/* callgrind name compression: a file or function is written in full with an id the
 * first time, and as "(id)" after. */
static void put_name(FILE *f, const char *what, uint32_t *ids, uint32_t *next, uint32_t i,
		     const char *name)
{
	if (ids[i]) {
		fprintf(f, "%s=(%" PRIu32 ")\n", what, ids[i]);
		return;
	}
	ids[i] = ++*next;
	/* a newline in a name would end the line: control characters are escaped */
	fprintf(f, "%s=(%" PRIu32 ") %s\n", what, ids[i], *name ? vw_shown(name) : "???");
}

/* Files are numbered per distinct path, while the table is keyed by function: maps
 * each function to the first function (by index) with the same file. */
static const struct vw_table *by_file_table;

static int by_file(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(by_file_table->funcs[x].key.file, by_file_table->funcs[y].key.file);
	return c ? c : (x > y) - (x < y);
}

static void file_slots(const struct vw_table *t, uint32_t *slot, uint32_t *tmp)
{
	for (uint32_t i = 0; i < t->nfuncs; i++)
		tmp[i] = i;
	by_file_table = t;
	qsort(tmp, t->nfuncs, sizeof(*tmp), by_file);
	for (uint32_t i = 0, lead = 0; i < t->nfuncs; i++) {
		if (!i || strcmp(t->funcs[tmp[i]].key.file, t->funcs[lead].key.file))
			lead = tmp[i];
		slot[tmp[i]] = lead;
	}
}

/* Writes the table as callgrind format version 1: one "fn" block per function with its
 * own time at its line, then one "calls" pair per callee with the inclusive time of
 * those calls (0 for a function calling itself, see below). */
static int write_callgrind(FILE *f, const struct vw_model *m)
{
	const struct vw_table *t = &m->funcs;
	uint32_t *fnid = calloc(t->nfuncs + 1, sizeof(*fnid));
	uint32_t *flid = calloc(t->nfuncs + 1, sizeof(*flid));
	uint32_t *slot = calloc(t->nfuncs + 1, sizeof(*slot));
	uint32_t *tmp = calloc(t->nfuncs + 1, sizeof(*tmp));
	if (!fnid || !flid || !slot || !tmp) {
		free(fnid);
		free(flid);
		free(slot);
		free(tmp);
		return -ENOMEM;
	}
	file_slots(t, slot, tmp);
	uint64_t total = 0;
	for (uint32_t i = 0; i < t->nfuncs; i++)
		if (__builtin_add_overflow(total, ns(t->funcs[i].s.tt), &total)) {
			free(fnid);
			free(flid);
			free(slot);
			free(tmp);
			return -ERANGE;
		}
	uint32_t nextfn = 0, nextfl = 0;
	char cmd[1024];
	vw_model_command(m, cmd, sizeof(cmd));
	fprintf(f, "# callgrind format\nversion: 1\ncreator: coprof %s\n", COPROF_VERSION);
	if (*cmd)
		fprintf(f, "cmd: %s\n", vw_shown(cmd));
	if (m->pid >= 0)
		fprintf(f, "pid: %" PRId64 "\n", m->pid);
	fprintf(f, "desc: clock: %s, mode: %s\npositions: line\nevents: ns\n", vw_shown(m->clock),
		vw_shown(m->mode));
	fprintf(f, "summary: %" PRIu64 "\n", total);
	for (uint32_t i = 0; i < t->nfuncs; i++) {
		const struct vw_func *fn = &t->funcs[i];
		fprintf(f, "\n");
		put_name(f, "fl", flid, &nextfl, slot[i], fn->key.file);
		put_name(f, "fn", fnid, &nextfn, i, fn->key.name);
		fprintf(f, "%" PRIu64 " %" PRIu64 "\n", fn->key.line, ns(fn->s.tt));
		for (uint32_t c = 0; c < fn->ncallees; c++) {
			uint32_t j = fn->callees[c].func;
			put_name(f, "cfl", flid, &nextfl, slot[j], t->funcs[j].key.file);
			put_name(f, "cfn", fnid, &nextfn, j, t->funcs[j].key.name);
			/* A direct recursive call's time is already in the outer call's
			 * cost: counting it again would double the function's inclusive
			 * cost in callgrind_annotate. Its call count stays. */
			fprintf(f, "calls=%" PRIu64 " %" PRIu64 "\n%" PRIu64 " %" PRIu64 "\n",
				fn->callees[c].s.nc, t->funcs[j].key.line, fn->key.line,
				j == i ? 0 : ns(fn->callees[c].s.ct));
		}
	}
	fprintf(f, "\ntotals: %" PRIu64 "\n", total);
	free(fnid);
	free(flid);
	free(slot);
	free(tmp);
	return 0;
}

/* A frame name for folded stacks: ';' separates frames, so it becomes '_', and so do
 * control characters (a newline would end the line). "name (file:line)" is too long
 * for most flame graphs; the name is kept. */
static void put_frame(FILE *f, const char *name)
{
	for (const char *p = name; *p; p++)
		fputc(*p == ';' || (unsigned char)*p < 0x20 || *p == 0x7f ? '_' : *p, f);
}

static const char *task_name(const struct cp_extras *ex, int64_t task, char *buf, size_t len)
{
	if (task < 0 || (uint64_t)task >= ex->ntasks) {
		snprintf(buf, len, "[thread]");
		return buf;
	}
	const struct cp_task *t = &ex->tasks[task];
	snprintf(buf, len, "[task %" PRIu64 "%s%s]", t->id, t->name && *t->name ? " " : "",
		 t->name ? t->name : "");
	return buf;
}

/* One line per sampled stack, outermost frame first, under a frame naming its thread
 * and its task (so a flame graph splits by coroutine). Stacks charged while their
 * coroutine waited (wall) end in a "[waiting]" frame. */
static uint64_t write_stacks(FILE *f, const struct cp_profile *p)
{
	const struct cp_extras *ex = &p->ex;
	uint64_t lines = 0;
	for (uint32_t i = 0; i < ex->nstacks; i++) {
		const struct cp_stack *s = &ex->stacks[i];
		char tn[300];
		if (!s->count)
			continue;
		fprintf(f, "[tid %" PRIu64 "];", s->thread);
		put_frame(f, task_name(ex, s->task, tn, sizeof(tn)));
		for (uint32_t d = s->depth; d-- > 0;) {
			fputc(';', f);
			if (s->frames[d] < p->stats.nfuncs)
				put_frame(f, p->stats.funcs[s->frames[d]].key.name);
			else
				fputs("[unknown]", f);
		}
		fprintf(f, "%s %" PRIu64 "\n", s->waiting ? ";[waiting]" : "", s->count);
		lines++;
	}
	return lines;
}

/* Two-frame stacks from the caller edges, all a traced profile honestly holds:
 * "caller;callee" weighted by the callee's own time in calls from that caller (the
 * edge's tt); functions without callers stand alone with their own time. Counts are
 * microseconds. */
static void write_edges(FILE *f, const struct vw_table *t)
{
	for (uint32_t i = 0; i < t->nfuncs; i++) {
		const struct vw_func *fn = &t->funcs[i];
		if (!fn->ncallers && ns(fn->s.tt) / 1000) {
			put_frame(f, fn->key.name);
			fprintf(f, " %" PRIu64 "\n", ns(fn->s.tt) / 1000);
		}
		for (uint32_t c = 0; c < fn->ncallers; c++) {
			uint64_t us = ns(fn->callers[c].s.tt) / 1000;
			if (!us)
				continue;
			put_frame(f, t->funcs[fn->callers[c].func].key.name);
			fputc(';', f);
			put_frame(f, fn->key.name);
			fprintf(f, " %" PRIu64 "\n", us);
		}
	}
}

int vw_cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"format", required_argument, NULL, 'F'},
	    {"output", required_argument, NULL, 'o'},
	    {"from-edges", no_argument, NULL, 'E'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *format = NULL, *out = NULL;
	int edges = 0, done = -1, c;
	optind = 1;
	while ((c = vw_cli_opt(argc, argv, "F:o:h", opts, usage, &done)) != -1) {
		switch (c) {
		case 'F':
			format = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'E':
			edges = 1;
			break;
		}
	}
	if (done >= 0)
		return done;
	if (optind >= argc || !format || !out) {
		usage(stderr);
		return 2;
	}
	int callgrind = !strcmp(format, "callgrind"), pprof = !strcmp(format, "pprof");
	if (!callgrind && !pprof && strcmp(format, "collapsed")) {
		fprintf(stderr,
			"coprof export: unknown format '%s' (callgrind, collapsed or pprof)\n",
			format);
		return 2;
	}
	struct vw_model m;
	if (vw_cli_load(&m, "export", argv + optind, argc - optind))
		return 2;
	uint32_t nstacks = 0;
	for (uint32_t i = 0; i < m.nprofiles; i++)
		nstacks += m.profiles[i]->ex.nstacks;
	if (!callgrind && !pprof && !nstacks && !edges) {
		fprintf(stderr,
			"coprof export: %s has no sampled stacks: folded stacks need a sampled "
			"profile (COPROF_MODE=sample). A traced or pstats file only has "
			"caller->callee edges: --from-edges writes those as two-frame stacks, or "
			"use --format callgrind.\n",
			argv[optind]);
		vw_model_free(&m);
		return 2;
	}
	FILE *f = strcmp(out, "-") ? fopen(out, "w") : stdout;
	if (!f) {
		fprintf(stderr, "coprof export: %s: %s\n", out, strerror(errno));
		vw_model_free(&m);
		return 2;
	}
	int rc = 0;
	if (callgrind)
		rc = write_callgrind(f, &m);
	else if (pprof)
		rc = vw_export_pprof(f, &m);
	else if (nstacks && !edges)
		for (uint32_t i = 0; i < m.nprofiles; i++)
			write_stacks(f, m.profiles[i]);
	else {
		fprintf(stderr, "coprof export: writing caller;callee pairs (own time in us per "
				"edge), not full stacks: the profile has no sampled stacks\n");
		write_edges(f, &m.funcs);
	}
	if (rc == -ENOMEM)
		fprintf(stderr, "coprof export: out of memory\n");
	if (rc == -ERANGE)
		fprintf(stderr, "coprof export: the times add up to more than callgrind's 64-bit "
				"costs hold\n");
	if (vw_cli_finish(f, "export", f == stdout ? "stdout" : out))
		rc = -EIO;
	vw_model_free(&m);
	return rc ? 2 : 0;
}
