/* cmd-report.c: `coprof report FILE...`: the merged profile as a yappi-like table
 * (text), or as CSV or JSON for scripts: functions, tasks, threads, callers, callees.
 * Reads files through the model; writes stdout; single-threaded. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awaits.h"
#include "cli.h"
#include "cmds.h"
#include "fmt.h"
#include "model.h"

enum format { TEXT, CSV, JSON };

struct report {
	struct vw_model m;
	struct vw_query q;
	uint64_t limit; /* 0: every row */
	enum format fmt;
	int sections; /* how many sections were printed, for separators */
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: coprof report FILE... [--sort tsub|ttot|ncall|tavg|name|file] [--reverse]\n"
	    "                     [--limit N] [--filter TEXT] [--tasks] [--threads] [--task ID]\n"
	    "                     [--callers NAME] [--callees NAME] [--stalls] [--awaits]\n"
	    "                     [--format text|csv|json]\n"
	    "Several files are merged as pstats.add does. Without --tasks, --threads, --task,\n"
	    "--callers, --callees, --stalls or --awaits, prints the function table.\n");
}

/* Starts a section: a blank line between text/CSV sections, a key in JSON. */
static void section(struct report *r, const char *json_key)
{
	if (r->fmt == JSON)
		printf("%s\n  \"%s\": ", r->sections ? "," : "", json_key);
	else if (r->sections)
		printf("\n");
	r->sections++;
}

static void print_header(struct report *r)
{
	const struct vw_model *m = &r->m;
	const struct vw_table *t = &m->funcs;
	char cmd[1024];
	vw_model_command(m, cmd, sizeof(cmd));
	if (r->fmt == JSON) {
		printf("{\n  \"files\": [");
		for (uint32_t i = 0; i < m->nprofiles; i++) {
			printf("%s", i ? ", " : "");
			vw_put_json(stdout, m->paths[i]);
		}
		printf("],\n  \"clock\": ");
		vw_put_json(stdout, m->clock);
		printf(",\n  \"mode\": ");
		vw_put_json(stdout, m->mode);
		printf(",\n  \"duration\": %.9g,\n  \"pid\": %" PRId64 ",\n  \"command\": ",
		       m->duration, m->pid);
		vw_put_json(stdout, cmd);
		printf(",\n  \"total_calls\": %" PRIu64 ",\n  \"primitive_calls\": %" PRIu64
		       ",\n  \"total_tt\": %.9g",
		       t->total_nc, t->total_cc, t->total_tt);
		r->sections = 1;
		return;
	}
	if (r->fmt == CSV)
		return;
	if (m->ex)
		printf("Clock: %s   Mode: %s   Duration: %.6f s   Pid: %" PRId64 "\n", m->clock,
		       m->mode, m->duration, m->pid);
	else
		printf("No coprof extras (a cProfile or yappi file): no clock, mode, pid, tasks\n");
	if (*cmd)
		printf("Command: %s\n", vw_shown(cmd));
	printf("Files:");
	for (uint32_t i = 0; i < m->nprofiles; i++)
		printf(" %s", vw_shown(m->paths[i]));
	printf("\n%" PRIu64 " function calls (%" PRIu64 " primitive calls) in %.6f seconds\n",
	       t->total_nc, t->total_cc, t->total_tt);
	r->sections = 1;
}

/* One function (or edge) row. `pct` < 0 leaves the tsub% column out. */
static void print_row(struct report *r, int first, int namew, const struct cp_key *k,
		      const struct cp_stat *s, double total)
{
	char calls[48], where[1200], tsub[16], ttot[16], tavg[16], name[512];
	vw_fmt_calls(calls, sizeof(calls), s);
	vw_fmt_where(where, sizeof(where), k);
	double pct = total > 0 ? 100.0 * s->tt / total : 0.0;
	if (r->fmt == CSV) {
		vw_put_csv(stdout, k->name);
		printf(",");
		vw_put_csv(stdout, k->file);
		printf(",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.9g,%.9g,%.9g,%.4f\n", k->line, s->nc,
		       s->cc, s->tt, s->ct, vw_tavg(s), pct);
		return;
	}
	if (r->fmt == JSON) {
		printf("%s\n    {\"name\": ", first ? "" : ",");
		vw_put_json(stdout, k->name);
		printf(", \"file\": ");
		vw_put_json(stdout, k->file);
		printf(", \"line\": %" PRIu64 ", \"nc\": %" PRIu64 ", \"cc\": %" PRIu64
		       ", \"tsub\": %.9g, \"ttot\": %.9g, \"tavg\": %.9g, \"pct\": %.4f}",
		       k->line, s->nc, s->cc, s->tt, s->ct, vw_tavg(s), pct);
		return;
	}
	vw_fit(name, sizeof(name), vw_shown(k->name), namew, 0);
	vw_fmt_time(tsub, sizeof(tsub), s->tt, 9);
	vw_fmt_time(ttot, sizeof(ttot), s->ct, 9);
	vw_fmt_time(tavg, sizeof(tavg), vw_tavg(s), 9);
	/* %-*s pads bytes, not characters: pad by hand for UTF-8 names. */
	int pad = namew - (int)strlen(name);
	for (const char *p = name; *p; p++)
		pad += ((unsigned char)*p & 0xc0) == 0x80;
	printf("%s%*s  %12s  %9s  %9s  %9s  %5.1f  %s\n", name, pad > 0 ? pad : 0, "", calls, tsub,
	       ttot, tavg, pct, where);
}

static void print_columns(struct report *r, int namew, const char *first)
{
	if (r->fmt == CSV)
		printf("%s,file,line,nc,cc,tsub,ttot,tavg,pct\n", first);
	else if (r->fmt == TEXT)
		printf("%-*s  %12s  %9s  %9s  %9s  %5s  %s\n", namew, first, "ncall", "tsub",
		       "ttot", "tavg", "tsub%", "file:line");
}

static int name_width(const struct vw_table *t, const uint32_t *rows, uint32_t n)
{
	size_t w = 4;
	for (uint32_t i = 0; i < n; i++) {
		size_t l = strlen(vw_shown(t->funcs[rows[i]].key.name));
		if (l > w)
			w = l;
	}
	return w > 48 ? 48 : (int)w;
}

static int print_functions(struct report *r, const struct vw_table *t, const char *title,
			   const char *json_key)
{
	uint32_t *rows = malloc((t->nfuncs ? t->nfuncs : 1) * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	uint32_t n = vw_table_select(t, &r->q, rows);
	uint32_t shown = r->limit && r->limit < n ? (uint32_t)r->limit : n;
	int namew = name_width(t, rows, shown);
	section(r, json_key);
	if (r->fmt == TEXT) {
		printf("%s, ordered by %s (%s)", title, vw_sort_name(r->q.sort),
		       r->q.reverse ? "reversed" : "default order");
		if (r->q.filter)
			printf(", filter \"%s\"", r->q.filter);
		printf(": %" PRIu32 " of %" PRIu32 " shown\n\n", shown, n);
	}
	print_columns(r, namew, "name");
	if (r->fmt == JSON)
		printf("[");
	for (uint32_t i = 0; i < shown; i++) {
		const struct vw_func *f = &t->funcs[rows[i]];
		print_row(r, i == 0, namew, &f->key, &f->s, t->total_tt);
	}
	if (r->fmt == JSON)
		printf("%s]", shown ? "\n  " : "");
	free(rows);
	return 0;
}

/* Rule 12's columns of a task, in the order the table prints them. */
#define TASK_TIMES 5
static const char *const time_names[TASK_TIMES] = {"run_cpu", "run_wall", "waiting", "ready",
						   "ready_max"};

static void task_times(const struct cp_task *t, double out[TASK_TIMES])
{
	out[0] = t->run_cpu;
	out[1] = t->run_wall;
	out[2] = t->waiting;
	out[3] = t->ready;
	out[4] = t->ready_max;
}

/* The text row's rule 12 columns: a time each, "-" where the task has none. */
static void put_task_times(const struct cp_task *t)
{
	double v[TASK_TIMES];
	task_times(t, v);
	for (int k = 0; k < TASK_TIMES; k++) {
		char buf[16] = "-";
		if (t->timed)
			vw_fmt_time(buf, sizeof(buf), v[k], 10);
		printf("  %10s", buf);
	}
}

static void print_tasks(struct report *r)
{
	const struct vw_model *m = &r->m;
	int timed = 0;
	for (uint32_t i = 0; i < m->ntasks; i++)
		timed |= m->tasks[i].t->timed;
	section(r, "tasks");
	if (r->fmt == TEXT) {
		printf("Tasks: %" PRIu32 "\n\n%6s  %-24s  %-9s  %8s  %-9s  %8s  %12s", m->ntasks,
		       "id", "name", "runtime", "thread", "state", "resumes", "ttot");
		if (timed)
			printf("  %10s  %10s  %10s  %10s  %10s", "run cpu", "run wall", "waiting",
			       "ready", "longest");
		printf("\n");
	} else if (r->fmt == CSV) {
		printf("id,name,runtime,thread,state,resumes,ttot,");
		for (int k = 0; k < TASK_TIMES; k++)
			printf("%s,", time_names[k]);
		printf("file\n");
	} else {
		printf("[");
	}
	for (uint32_t i = 0; i < m->ntasks; i++) {
		const struct cp_task *t = m->tasks[i].t;
		const char *name = t->name ? t->name : "", *rt = t->runtime ? t->runtime : "";
		const char *state = t->state ? t->state : "";
		double v[TASK_TIMES];
		task_times(t, v);
		if (r->fmt == TEXT) {
			char nm[128], tt[16];
			vw_fit(nm, sizeof(nm), vw_shown(name), 24, 0);
			vw_fmt_time(tt, sizeof(tt), t->ttot, 12);
			printf("%6" PRIu64 "  %-24s  %-9s  %8" PRIu64 "  %-9s  %8" PRIu64 "  %12s",
			       t->id, nm, rt, t->thread, state, t->resumes, tt);
			if (timed)
				put_task_times(t);
			printf("\n");
		} else if (r->fmt == CSV) {
			printf("%" PRIu64 ",", t->id);
			vw_put_csv(stdout, name);
			printf(",");
			vw_put_csv(stdout, rt);
			printf(",%" PRIu64 ",%s,%" PRIu64 ",%.9g,", t->thread, state, t->resumes,
			       t->ttot);
			for (int k = 0; k < TASK_TIMES; k++)
				printf(t->timed ? "%.9g," : ",", v[k]);
			vw_put_csv(stdout, m->paths[m->tasks[i].file]);
			printf("\n");
		} else {
			printf("%s\n    {\"id\": %" PRIu64 ", \"name\": ", i ? "," : "", t->id);
			vw_put_json(stdout, name);
			printf(", \"runtime\": ");
			vw_put_json(stdout, rt);
			printf(", \"thread\": %" PRIu64 ", \"state\": ", t->thread);
			vw_put_json(stdout, state);
			printf(", \"resumes\": %" PRIu64 ", \"ttot\": %.9g, ", t->resumes, t->ttot);
			for (int k = 0; t->timed && k < TASK_TIMES; k++)
				printf("\"%s\": %.9g, ", time_names[k], v[k]);
			printf("\"functions\": %" PRIu32 "}", t->stats.nfuncs);
		}
	}
	if (r->fmt == JSON)
		printf("%s]", m->ntasks ? "\n  " : "");
}

static void print_threads(struct report *r)
{
	const struct vw_model *m = &r->m;
	section(r, "threads");
	if (r->fmt == TEXT)
		printf("Threads: %" PRIu32 "\n\n%8s  %-24s  %10s  %12s\n", m->nthreads, "tid",
		       "name", "switches", "ttot");
	else if (r->fmt == CSV)
		printf("tid,name,switches,ttot,file\n");
	else
		printf("[");
	for (uint32_t i = 0; i < m->nthreads; i++) {
		const struct cp_thread *t = m->threads[i].t;
		const char *name = t->name ? t->name : "";
		if (r->fmt == TEXT) {
			char nm[128], tt[16];
			vw_fit(nm, sizeof(nm), vw_shown(name), 24, 0);
			vw_fmt_time(tt, sizeof(tt), t->ttot, 12);
			printf("%8" PRIu64 "  %-24s  %10" PRIu64 "  %12s\n", t->tid, nm,
			       t->switches, tt);
		} else if (r->fmt == CSV) {
			printf("%" PRIu64 ",", t->tid);
			vw_put_csv(stdout, name);
			printf(",%" PRIu64 ",%.9g,", t->switches, t->ttot);
			vw_put_csv(stdout, m->paths[m->threads[i].file]);
			printf("\n");
		} else {
			printf("%s\n    {\"tid\": %" PRIu64 ", \"name\": ", i ? "," : "", t->tid);
			vw_put_json(stdout, name);
			printf(", \"switches\": %" PRIu64 ", \"ttot\": %.9g}", t->switches,
			       t->ttot);
		}
	}
	if (r->fmt == JSON)
		printf("%s]", m->nthreads ? "\n  " : "");
}

static void put_stall_text(const struct cp_stall *s, uint32_t rank)
{
	char ms[32];
	snprintf(ms, sizeof(ms), "%.3f ms", s->seconds * 1e3);
	if (s->task_id) /* 0: a loop callback, run by the thread itself (rule 11) */
		printf("%4" PRIu32 ". %12s  task %" PRIu64 " (%s)  thread %" PRIu64, rank, ms,
		       s->task_id, vw_shown(s->task ? s->task : ""), s->thread);
	else
		printf("%4" PRIu32 ". %12s  callback %s  thread %" PRIu64, rank, ms,
		       vw_shown(s->task ? s->task : ""), s->thread);
	if (s->behind > 0)
		printf("  %" PRId64 " ready behind it", s->behind);
	printf("\n");
	for (uint32_t k = 0; k < s->depth; k++) {
		char where[1200];
		vw_fmt_where(where, sizeof(where), &s->frames[k]);
		printf("        %-32s  %s\n", vw_shown(s->frames[k].name), where);
	}
}

/* The stalls of every file (doc/design.md rule 11), longest first, each with the
 * stack of its longest point, innermost first. */
static int print_stalls(struct report *r)
{
	const struct vw_model *m = &r->m;
	uint32_t n = m->nstalls;
	double threshold = m->stall_threshold;
	uint32_t shown = r->limit && r->limit < n ? (uint32_t)r->limit : n;
	section(r, "stalls");
	if (r->fmt == TEXT && threshold > 0)
		printf("Stalls: %" PRIu32 " steps of %.3f ms or more, longest first, each at "
		       "its longest point: %" PRIu32 " shown\n",
		       n, threshold * 1e3, shown);
	else if (r->fmt == TEXT)
		printf("Stalls: not measured (no task's step was seen: sample mode where no "
		       "runtime says when its tasks switch, or a file older than stalls)\n");
	else if (r->fmt == CSV)
		printf("seconds,task_id,task,thread,behind,stack,file\n");
	else
		printf("[");
	for (uint32_t i = 0; i < shown; i++) {
		const struct cp_stall *s = m->stalls[i].s;
		if (r->fmt == TEXT) {
			printf("\n");
			put_stall_text(s, i + 1);
		} else if (r->fmt == CSV) {
			printf("%.9g,%" PRIu64 ",", s->seconds, s->task_id);
			vw_put_csv(stdout, s->task ? s->task : "");
			printf(",%" PRIu64 ",", s->thread);
			if (s->behind >= 0)
				printf("%" PRId64, s->behind);
			printf(",");
			char stack[4096];
			vw_fmt_stack(stack, sizeof(stack), s->frames, s->depth, ";", 1);
			vw_put_csv(stdout, stack);
			printf(",");
			vw_put_csv(stdout, m->paths[m->stalls[i].file]);
			printf("\n");
		} else {
			printf("%s\n    {\"seconds\": %.9g, \"task_id\": %" PRIu64 ", \"task\": ",
			       i ? "," : "", s->seconds, s->task_id);
			vw_put_json(stdout, s->task ? s->task : "");
			printf(", \"thread\": %" PRIu64 ", ", s->thread);
			if (s->behind >= 0)
				printf("\"behind\": %" PRId64 ", ", s->behind);
			printf("\"stack\": [");
			for (uint32_t k = 0; k < s->depth; k++) {
				printf("%s{\"name\": ", k ? ", " : "");
				vw_put_json(stdout, s->frames[k].name);
				printf(", \"file\": ");
				vw_put_json(stdout, s->frames[k].file);
				printf(", \"line\": %" PRIu64 "}", s->frames[k].line);
			}
			printf("]}");
		}
	}
	if (r->fmt == JSON)
		printf("%s]", shown ? "\n  " : "");
	return 0;
}

/* Callers or callees of every function named `name` (exactly, or failing that, every
 * function whose name contains it), as pstats' print_callers / print_callees. */
static int print_edges(struct report *r, const char *name, int callees)
{
	const struct vw_table *t = &r->m.funcs;
	uint32_t nmatch = 0;
	for (int exact = 1; exact >= 0 && !nmatch; exact--)
		for (uint32_t i = 0; i < t->nfuncs; i++)
			if (exact ? !strcmp(t->funcs[i].key.name, name)
				  : !!strstr(t->funcs[i].key.name, name))
				nmatch++;
	if (!nmatch) {
		fprintf(stderr, "coprof report: no function named '%s'\n", name);
		return -ENOENT;
	}
	int exact = 0;
	for (uint32_t i = 0; i < t->nfuncs && !exact; i++)
		exact = !strcmp(t->funcs[i].key.name, name);
	section(r, callees ? "callees" : "callers");
	if (r->fmt == JSON)
		printf("[");
	uint32_t done = 0;
	for (uint32_t i = 0; i < t->nfuncs; i++) {
		const struct vw_func *f = &t->funcs[i];
		if (exact ? strcmp(f->key.name, name) != 0 : !strstr(f->key.name, name))
			continue;
		uint32_t n = callees ? f->ncallees : f->ncallers;
		struct vw_edge *e = malloc((n ? n : 1) * sizeof(*e));
		if (!e)
			return -ENOMEM;
		memcpy(e, callees ? f->callees : f->callers, n * sizeof(*e));
		vw_edges_sort(t, e, n, &r->q);
		uint32_t shown = r->limit && r->limit < n ? (uint32_t)r->limit : n;
		char where[1200];
		vw_fmt_where(where, sizeof(where), &f->key);
		if (r->fmt == TEXT) {
			printf("%s%s of %s (%s): %" PRIu32 "\n\n", done ? "\n" : "",
			       callees ? "Callees" : "Callers", vw_shown(f->key.name), where, n);
		} else if (r->fmt == JSON) {
			printf("%s\n    {\"name\": ", done ? "," : "");
			vw_put_json(stdout, f->key.name);
			printf(", \"file\": ");
			vw_put_json(stdout, f->key.file);
			printf(", \"line\": %" PRIu64 ", \"edges\": [", f->key.line);
		}
		int namew = 4;
		for (uint32_t j = 0; j < shown; j++) {
			int l = (int)strlen(t->funcs[e[j].func].key.name);
			namew = l > namew ? (l > 48 ? 48 : l) : namew;
		}
		if (r->fmt == CSV && !done)
			printf("function,function_file,function_line,");
		if (r->fmt != JSON && (r->fmt == TEXT || !done))
			print_columns(r, namew, callees ? "callee" : "caller");
		for (uint32_t j = 0; j < shown; j++) {
			if (r->fmt == CSV) {
				vw_put_csv(stdout, f->key.name);
				printf(",");
				vw_put_csv(stdout, f->key.file);
				printf(",%" PRIu64 ",", f->key.line);
			}
			print_row(r, j == 0, namew, &t->funcs[e[j].func].key, &e[j].s, t->total_tt);
		}
		if (r->fmt == JSON)
			printf("]}");
		free(e);
		done++;
	}
	if (r->fmt == JSON)
		printf("\n  ]");
	return 0;
}

static int find_task(const struct vw_model *m, const char *id, uint32_t *out)
{
	uint64_t v;
	int numeric = vw_parse_u64(id, &v) == 0;
	for (uint32_t i = 0; i < m->ntasks; i++) {
		const struct cp_task *t = m->tasks[i].t;
		if ((numeric && t->id == v) || (t->name && !strcmp(t->name, id))) {
			*out = i;
			return 0;
		}
	}
	return -ENOENT;
}

int vw_cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"sort", required_argument, NULL, 's'},    {"reverse", no_argument, NULL, 'r'},
	    {"limit", required_argument, NULL, 'l'},   {"filter", required_argument, NULL, 'f'},
	    {"tasks", no_argument, NULL, 'T'},	       {"threads", no_argument, NULL, 'H'},
	    {"task", required_argument, NULL, 't'},    {"callers", required_argument, NULL, 'c'},
	    {"callees", required_argument, NULL, 'e'}, {"format", required_argument, NULL, 'F'},
	    {"stalls", no_argument, NULL, 'S'},	       {"help", no_argument, NULL, 'h'},
	    {"awaits", no_argument, NULL, 'A'},
	    {NULL, 0, NULL, 0},
	};
	struct report r = {.q = {VW_SORT_TTOT, 0, NULL}, .fmt = TEXT};
	int tasks = 0, threads = 0, stalls = 0, awaits = 0;
	const char *callers = NULL, *callees = NULL, *task = NULL;
	int done = -1, c;
	optind = 1;
	while ((c = vw_cli_opt(argc, argv, "s:rl:f:F:h", opts, usage, &done)) != -1) {
		switch (c) {
		case 's':
			if (vw_sort_parse(optarg, &r.q.sort)) {
				fprintf(stderr, "coprof report: unknown sort '%s'\n", optarg);
				return 2;
			}
			break;
		case 'r':
			r.q.reverse = 1;
			break;
		case 'l':
			if (vw_parse_u64(optarg, &r.limit)) {
				fprintf(stderr, "coprof report: --limit wants a number, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'f':
			r.q.filter = optarg;
			break;
		case 'T':
			tasks = 1;
			break;
		case 'H':
			threads = 1;
			break;
		case 'S':
			stalls = 1;
			break;
		case 'A':
			awaits = 1;
			break;
		case 't':
			task = optarg;
			break;
		case 'c':
			callers = optarg;
			break;
		case 'e':
			callees = optarg;
			break;
		case 'F':
			if (!strcmp(optarg, "text"))
				r.fmt = TEXT;
			else if (!strcmp(optarg, "csv"))
				r.fmt = CSV;
			else if (!strcmp(optarg, "json"))
				r.fmt = JSON;
			else {
				fprintf(stderr, "coprof report: unknown format '%s'\n", optarg);
				return 2;
			}
			break;
		}
	}
	if (done >= 0)
		return done;
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (vw_cli_load(&r.m, "report", argv + optind, argc - optind))
		return 2;
	uint32_t ti = 0;
	if (task && find_task(&r.m, task, &ti)) {
		fprintf(stderr, "coprof report: no task '%s'\n", task);
		vw_model_free(&r.m);
		return 2;
	}
	print_header(&r);
	int rc = 0;
	if (!tasks && !threads && !task && !callers && !callees && !stalls && !awaits)
		rc = print_functions(&r, &r.m.funcs, "Functions", "functions");
	if (!rc && stalls)
		rc = print_stalls(&r);
	if (!rc && awaits) {
		section(&r, "awaits");
		rc = vw_print_awaits(stdout, &r.m, (enum vw_awaits_format)r.fmt, r.limit);
	}
	if (!rc && tasks)
		print_tasks(&r);
	if (!rc && threads)
		print_threads(&r);
	if (!rc && task) {
		const struct vw_table *t = vw_model_task_table(&r.m, ti);
		char title[256];
		snprintf(title, sizeof(title), "Functions of task %" PRIu64 " (%s)",
			 r.m.tasks[ti].t->id, vw_shown(r.m.tasks[ti].t->name));
		rc = t ? print_functions(&r, t, title, "task_functions") : -ENOMEM;
	}
	if (!rc && callers)
		rc = print_edges(&r, callers, 0);
	if (!rc && callees)
		rc = print_edges(&r, callees, 1);
	if (r.fmt == JSON)
		printf("\n}\n");
	vw_model_free(&r.m);
	if (rc == -ENOMEM)
		fprintf(stderr, "coprof report: out of memory\n");
	if (vw_cli_finish(stdout, "report", "the report"))
		return 2;
	return rc ? 2 : 0;
}
