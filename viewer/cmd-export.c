/* cmd-export.c: `coprof export FILE --format callgrind|collapsed -o OUT`: callgrind
 * profile data (callgrind_annotate, kcachegrind) from the merged function table, or
 * folded stacks (flame graphs) from a sampled profile's stacks, a traced profile's
 * edges by task, or the stalls. Single-threaded. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"
#include "export-pprof.h"
#include "export-traced.h"
#include "fmt.h"
#include "model.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: coprof export FILE... --format callgrind|collapsed -o OUT\n"
		   "                             [--from-edges] [--stalls] [--no-tasks]\n"
		   "       coprof export FILE... --format pprof -o OUT.pb.gz\n"
		   "  callgrind: costs in ns (event \"ns\"); calls lines carry inclusive cost.\n"
		   "  collapsed: folded stacks from a sampled profile (one line per stack,\n"
		   "             count = samples) under a [tid N] and a [task ID NAME] or\n"
		   "             [thread] frame; --from-edges derives caller;callee pairs from\n"
		   "             a traced profile instead (tsub in us per edge, not true stacks)\n"
		   "             under the task's frame; --stalls writes the stalls (length in\n"
		   "             us); --no-tasks leaves out the thread and task frames.\n"
		   "  pprof:     gzipped profile.proto (go tool pprof, Pyroscope, Parca): sampled\n"
		   "             stacks, or a traced profile's caller;callee pairs and own times,\n"
		   "             labelled thread and task; stalls as samples of the types stalls\n"
		   "             and stall_time, labelled stall=true and stall_length.\n"
		   "  -o, --output OUT: the file to write; \"-\" is stdout.\n");
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
		if (__builtin_add_overflow(total, vw_ns(t->funcs[i].s.tt), &total)) {
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
		fprintf(f, "%" PRIu64 " %" PRIu64 "\n", fn->key.line, vw_ns(fn->s.tt));
		for (uint32_t c = 0; c < fn->ncallees; c++) {
			uint32_t j = fn->callees[c].func;
			put_name(f, "cfl", flid, &nextfl, slot[j], t->funcs[j].key.file);
			put_name(f, "cfn", fnid, &nextfn, j, t->funcs[j].key.name);
			/* A direct recursive call's time is already in the outer call's
			 * cost: counting it again would double the function's inclusive
			 * cost in callgrind_annotate. Its call count stays. */
			fprintf(f, "calls=%" PRIu64 " %" PRIu64 "\n%" PRIu64 " %" PRIu64 "\n",
				fn->callees[c].s.nc, t->funcs[j].key.line, fn->key.line,
				j == i ? 0 : vw_ns(fn->callees[c].s.ct));
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

/* A task's frame, "[task ID NAME]" ("[task ID]" without a name), in buf. */
static const char *task_frame(char *buf, size_t len, uint64_t id, const char *name)
{
	snprintf(buf, len, "[task %" PRIu64 "%s%s]", id, name && *name ? " " : "",
		 name ? name : "");
	return buf;
}

static const char *task_name(const struct cp_extras *ex, int64_t task, char *buf, size_t len)
{
	if (task < 0 || (uint64_t)task >= ex->ntasks)
		return "[thread]";
	return task_frame(buf, len, ex->tasks[task].id, ex->tasks[task].name);
}

/* The frames "[tid N];[task ID NAME]" (or "[thread]" for no task) that start a line,
 * so a flame graph splits by thread and coroutine. */
static void put_who(FILE *f, uint64_t tid, const char *task)
{
	fprintf(f, "[tid %" PRIu64 "];", tid);
	put_frame(f, task);
}

/* One line per sampled stack, outermost frame first, under the frames naming its
 * thread and task unless `tasks` is 0. Stacks charged while their coroutine waited
 * (wall) end in a "[waiting]" frame. */
static uint64_t write_stacks(FILE *f, const struct cp_profile *p, int tasks)
{
	const struct cp_extras *ex = &p->ex;
	uint64_t lines = 0;
	for (uint32_t i = 0; i < ex->nstacks; i++) {
		const struct cp_stack *s = &ex->stacks[i];
		char tn[300];
		if (!s->count)
			continue;
		const char *sep = tasks ? ";" : "";
		if (tasks)
			put_who(f, s->thread, task_name(ex, s->task, tn, sizeof(tn)));
		for (uint32_t d = s->depth; d-- > 0; sep = ";") {
			fputs(sep, f);
			if (s->frames[d] < p->stats.nfuncs)
				put_frame(f, p->stats.funcs[s->frames[d]].key.name);
			else
				fputs("[unknown]", f);
		}
		if (!*sep) /* no frame at all, and --no-tasks: a line needs one */
			fputs("[no stack]", f);
		fprintf(f, "%s%s %" PRIu64 "\n", s->waiting ? sep : "",
			s->waiting ? "[waiting]" : "", s->count);
		lines++;
	}
	return lines;
}

struct edges_out {
	FILE *f;
	const struct vw_table *t;
	int tasks;
};

/* One line of --from-edges: "caller;callee" or a function alone, in us, under its
 * task's frame ("[task ID NAME]", "[thread]" for the threads' own stacks) when the file
 * has tasks to tell and `tasks` is 1. Pieces under 1 us are left out. */
static int put_edge_line(void *arg, const struct vw_part *pt)
{
	const struct edges_out *o = arg;
	char tn[300];
	uint64_t us = pt->ns / 1000;
	if (!us)
		return 0;
	if (o->tasks && pt->ex->present) {
		put_frame(o->f, pt->task ? task_frame(tn, sizeof(tn), pt->task->id, pt->task->name)
					 : "[thread]");
		fputc(';', o->f);
	}
	if (pt->caller >= 0) {
		put_frame(o->f, o->t->funcs[pt->caller].key.name);
		fputc(';', o->f);
	}
	put_frame(o->f, o->t->funcs[pt->callee].key.name);
	fprintf(o->f, " %" PRIu64 "\n", us);
	return 0;
}

/* One line per stall, longest first: its stack, outermost first, under its thread's and
 * task's frames unless `tasks` is 0, worth its length in us. */
static void write_stalls(FILE *f, const struct vw_model *m, int tasks)
{
	for (uint32_t i = 0; i < m->nstalls; i++) {
		const struct cp_stall *s = m->stalls[i].s;
		char tn[300];
		const char *sep = tasks ? ";" : "";
		if (tasks && !s->task_id) /* a loop callback, run by the thread itself */
			snprintf(tn, sizeof(tn), "[callback %s]", s->task ? s->task : "");
		if (tasks)
			put_who(f, s->thread,
				s->task_id ? task_frame(tn, sizeof(tn), s->task_id, s->task) : tn);
		for (uint32_t d = s->depth; d-- > 0; sep = ";") {
			fputs(sep, f);
			put_frame(f, s->frames[d].name);
		}
		if (!*sep)
			fputs("[no stack]", f);
		fprintf(f, " %" PRIu64 "\n", vw_ns(s->seconds) / 1000);
	}
}

int vw_cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"format", required_argument, NULL, 'F'},
	    {"output", required_argument, NULL, 'o'},
	    {"from-edges", no_argument, NULL, 'E'},
	    {"stalls", no_argument, NULL, 'S'},
	    {"no-tasks", no_argument, NULL, 'T'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *format = NULL, *out = NULL;
	int edges = 0, stalls = 0, tasks = 1, done = -1, c;
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
		case 'S':
			stalls = 1;
			break;
		case 'T':
			tasks = 0;
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
	if ((callgrind || pprof) && (edges || stalls || !tasks)) {
		fprintf(stderr,
			"coprof export: --from-edges, --stalls and --no-tasks go with "
			"--format collapsed%s\n",
			pprof ? " (pprof always has the stalls and the task labels)" : "");
		return 2;
	}
	if (stalls && edges) {
		fprintf(stderr, "coprof export: --stalls and --from-edges are two different "
				"exports: give one\n");
		return 2;
	}
	struct vw_model m;
	if (vw_cli_load(&m, "export", argv + optind, argc - optind))
		return 2;
	uint32_t nstacks = 0;
	for (uint32_t i = 0; i < m.nprofiles; i++)
		nstacks += m.profiles[i]->ex.nstacks;
	if (stalls && !m.nstalls && m.stall_threshold <= 0) {
		fprintf(stderr,
			"coprof export: %s has no stalls: they are measured in trace mode, by "
			"coprof files written since stalls exist\n",
			argv[optind]);
		vw_model_free(&m);
		return 2;
	}
	if (!callgrind && !pprof && !nstacks && !edges && !stalls) {
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
	else if (stalls) {
		write_stalls(f, &m, tasks);
		if (!m.nstalls)
			fprintf(stderr,
				"coprof export: no task step took %.3f ms or more: no "
				"stalls to write\n",
				m.stall_threshold * 1e3);
	} else if (nstacks && !edges)
		for (uint32_t i = 0; i < m.nprofiles; i++)
			write_stacks(f, m.profiles[i], tasks);
	else {
		struct edges_out eo = {f, &m.funcs, tasks};
		fprintf(stderr, "coprof export: writing caller;callee pairs (own time in us per "
				"edge), not full stacks: the profile has no sampled stacks\n");
		rc = vw_traced_parts(&m, put_edge_line, &eo);
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
