/* sample-profile.c: builds the file layer's reference profile and describes it as
 * JSON (see sample-profile.h). Used by gen-profile, the unit tests and the fuzz
 * corpus; single-threaded. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sample-profile.h"

struct fdef {
	const char *file;
	uint64_t line;
	const char *name;
	uint64_t cc, nc;
	double tt, ct;
};

struct edef {
	int callee, caller;
	uint64_t nc, cc;
	double tt, ct;
};

static char long_name[301];

static const struct fdef funcs[] = {
    {"main.c", 10, "main", 1, 1, 0.5, 3.25},
    {"/src/ünïcode/файл.py", 42, "函数_naïve", 3, 5, 0.125, 1.0},
    {"~", 0, "<built-in method builtins.len>", 5000000000ULL, 5000000000ULL, 1.5, 1.5},
    {"zero.c", 7, "zero_time", 4, 4, 0.0, 0.0},
    /* the largest counts a reader takes: 2^53 in all (pstat-read.c) */
    {"big.c", 1ULL << 40, "huge_counts", 1ULL << 51, (1ULL << 52) - 1, 1e-9, 2e-9},
    {"nan.c", 1, "nan_time", 1, 1, NAN, INFINITY},
    {"long.c", 2147483647, long_name, 2, 2, 0.25, 0.25},
    {"emoji.py", 3, "coro_🚀 q\"uote\\d\ttab", 1, 1, 1.0 / 3.0, 2.0 / 3.0},
};

static const struct edef edges[] = {
    {1, 0, 3, 3, 0.1, 0.8},
    {1, 1, 2, 0, 0.025, 0.2},
    {2, 0, 3000000000ULL, 3000000000ULL, 1.0, 1.0},
    {2, 1, 2000000000ULL, 2000000000ULL, 0.5, 0.5},
    {3, 0, 4, 4, 0.0, 0.0},
    {4, 1, (1ULL << 52) - 1, 1ULL << 51, 1e-9, 2e-9},
    {5, 0, 1, 1, -INFINITY, NAN},
    {6, 7, 2, 2, 0.25, 0.25},
    {7, 0, 1, 1, 1.0 / 3.0, 2.0 / 3.0},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Fills `s` with the functions whose indices are listed in `which` (all when NULL),
 * keeping the edges between them. */
static int fill_stats(struct cp_arena *a, struct cp_stats *s, const int *which, int nwhich)
{
	int map[N(funcs)];
	int n = 0;

	for (size_t i = 0; i < N(funcs); i++)
		map[i] = -1;
	for (int i = 0; i < (which ? nwhich : (int)N(funcs)); i++)
		map[which ? which[i] : i] = n++;
	s->funcs = cp_arena_alloc(a, (size_t)n * sizeof(*s->funcs));
	if (!s->funcs)
		return -ENOMEM;
	s->nfuncs = (uint32_t)n;
	for (size_t i = 0; i < N(funcs); i++) {
		struct cp_func *f;
		if (map[i] < 0)
			continue;
		f = &s->funcs[map[i]];
		f->key.file = funcs[i].file;
		f->key.line = funcs[i].line;
		f->key.name = funcs[i].name;
		f->s = (struct cp_stat){funcs[i].cc, funcs[i].nc, funcs[i].tt, funcs[i].ct};
		f->callers = cp_arena_alloc(a, N(edges) * sizeof(*f->callers));
		if (!f->callers)
			return -ENOMEM;
		for (size_t j = 0; j < N(edges); j++) {
			if (edges[j].callee != (int)i || map[edges[j].caller] < 0)
				continue;
			f->callers[f->ncallers++] = (struct cp_edge){
			    (uint32_t)map[edges[j].caller],
			    {edges[j].cc, edges[j].nc, edges[j].tt, edges[j].ct},
			};
		}
	}
	return 0;
}

static const char *argv_[] = {"prog", "--flag", "ärg"};
static const char *notes_[] = {"note one", "nöte ✓"};
static struct cp_counter dropped_[] = {{"frames", 7}, {"events", 5000000000ULL}};
static struct cp_thread threads_[] = {{1234, "main", 3.25, 17, NULL, 0},
				      {1240, "wörker", 0.5, 0, NULL, 0}};
static uint32_t stack0[] = {2, 1, 0};
static uint32_t stack1[] = {7, 0};

int sample_profile(struct cp_profile **out)
{
	static const int task0[] = {0, 1, 2}, task1[] = {7, 6, 3};
	struct cp_profile *p;
	struct cp_extras *x;
	int r;

	memset(long_name, 'x', sizeof(long_name) - 1);
	if ((r = cp_profile_new(&p)) < 0)
		return r;
	x = &p->ex;
	x->tasks = cp_arena_alloc(p->arena, 2 * sizeof(*x->tasks));
	x->stacks = cp_arena_alloc(p->arena, 2 * sizeof(*x->stacks));
	if (!x->tasks || !x->stacks || (r = fill_stats(p->arena, &p->stats, NULL, 0)) < 0 ||
	    (r = fill_stats(p->arena, &x->tasks[0].stats, task0, 3)) < 0 ||
	    (r = fill_stats(p->arena, &x->tasks[1].stats, task1, 3)) < 0) {
		cp_profile_free(p);
		return r < 0 ? r : -ENOMEM;
	}
	x->present = 1;
	x->version = CP_FORMAT_VERSION;
	x->clock = "wall";
	x->mode = "trace";
	x->pid = 4321;
	x->argv = argv_;
	x->argc = N(argv_);
	x->start = 1700000000.5;
	x->stop = 1700000003.75;
	x->hz = 0;
	x->overflow = 1;
	x->dropped = dropped_;
	x->ndropped = N(dropped_);
	x->notes = notes_;
	x->nnotes = N(notes_);
	x->ntasks = 2;
	x->tasks[0] = (struct cp_task){7,    "worker-1", "asyncio",  1234,
				       1.75, 3,		 "finished", x->tasks[0].stats,
				       1, 0.25, 0.5, 0.125, 0.0625, 1.125};
	x->tasks[1] = (struct cp_task){0x7f0000001000ULL, "cöro ✓",    "ucontext",	 1240, 0.5,
				       5000000000ULL,	  "suspended", x->tasks[1].stats,
				       0, 0, 0, 0, 0, 0};
	x->threads = threads_;
	x->nthreads = N(threads_);
	x->nstacks = 2;
	x->stacks[0] = (struct cp_stack){-1, 1234, stack0, N(stack0), 40, 40000000, 0};
	x->stacks[1] =
	    (struct cp_stack){1, 1240, stack1, N(stack1), 3000000000ULL, 3000000000000ULL, 1};
	*out = p;
	return 0;
}

/* --- JSON ---------------------------------------------------------------------------- */

static void jstr(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(f, "\\%c", *c);
		else if (*c < 0x20)
			fprintf(f, "\\u%04x", *c);
		else
			fputc(*c, f);
	}
	fputc('"', f);
}

static void jnum(FILE *f, double d)
{
	fprintf(f, "%.17g", isfinite(d) ? d : 0.0);
}

static void jkey(FILE *f, const struct cp_key *k)
{
	fputs("\"file\": ", f);
	jstr(f, k->file);
	fprintf(f, ", \"line\": %llu, \"name\": ", (unsigned long long)k->line);
	jstr(f, k->name);
}

static void jstat(FILE *f, const struct cp_stat *s)
{
	fprintf(f, ", \"cc\": %llu, \"nc\": %llu, \"tt\": ", (unsigned long long)s->cc,
		(unsigned long long)s->nc);
	jnum(f, s->tt);
	fputs(", \"ct\": ", f);
	jnum(f, s->ct);
}

static void jstats(FILE *f, const struct cp_stats *s)
{
	fputc('[', f);
	for (uint32_t i = 0; i < s->nfuncs; i++) {
		const struct cp_func *fn = &s->funcs[i];
		fprintf(f, "%s\n {", i ? "," : "");
		jkey(f, &fn->key);
		jstat(f, &fn->s);
		fputs(", \"callers\": [", f);
		for (uint32_t j = 0; j < fn->ncallers; j++) {
			fputs(j ? ", {" : "{", f);
			jkey(f, &s->funcs[fn->callers[j].caller].key);
			jstat(f, &fn->callers[j].s);
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputc(']', f);
}

static void jstrs(FILE *f, const char **v, uint32_t n)
{
	fputc('[', f);
	for (uint32_t i = 0; i < n; i++) {
		fputs(i ? ", " : "", f);
		jstr(f, v[i]);
	}
	fputc(']', f);
}

int sample_profile_json(const struct cp_profile *p, FILE *f)
{
	const struct cp_extras *x = &p->ex;

	fputs("{\"stats\": ", f);
	jstats(f, &p->stats);
	fputs(",\n\"extras\": {\"coprof\": ", f);
	fprintf(f, "%d, \"clock\": ", CP_FORMAT_VERSION);
	jstr(f, x->clock);
	fputs(", \"mode\": ", f);
	jstr(f, x->mode);
	fprintf(f, ", \"pid\": %lld, \"argv\": ", (long long)x->pid);
	jstrs(f, x->argv, x->argc);
	fputs(", \"start\": ", f);
	jnum(f, x->start);
	fputs(", \"stop\": ", f);
	jnum(f, x->stop);
	fputs(", \"hz\": ", f);
	jnum(f, x->hz);
	fprintf(f, ", \"overflow\": %s, \"dropped\": {", x->overflow ? "true" : "false");
	for (uint32_t i = 0; i < x->ndropped; i++) {
		fputs(i ? ", " : "", f);
		jstr(f, x->dropped[i].name);
		fprintf(f, ": %llu", (unsigned long long)x->dropped[i].n);
	}
	fputs("}, \"notes\": ", f);
	jstrs(f, x->notes, x->nnotes);
	fputs(",\n\"tasks\": [", f);
	for (uint32_t i = 0; i < x->ntasks; i++) {
		const struct cp_task *t = &x->tasks[i];
		fprintf(f, "%s{\"id\": %llu, \"name\": ", i ? ", " : "", (unsigned long long)t->id);
		jstr(f, t->name);
		fputs(", \"runtime\": ", f);
		jstr(f, t->runtime);
		fprintf(f, ", \"thread\": %llu, \"ttot\": ", (unsigned long long)t->thread);
		jnum(f, t->ttot);
		fprintf(f, ", \"resumes\": %llu, \"state\": ", (unsigned long long)t->resumes);
		jstr(f, t->state);
		if (t->timed) {
			const char *names[] = {"run_cpu", "run_wall", "ready", "ready_max", "waiting"};
			const double vals[] = {t->run_cpu, t->run_wall, t->ready, t->ready_max,
					       t->waiting};
			for (int k = 0; k < 5; k++) {
				fprintf(f, ", \"%s\": ", names[k]);
				jnum(f, vals[k]);
			}
		}
		fputs(", \"stats\": ", f);
		jstats(f, &t->stats);
		fputc('}', f);
	}
	fputs("],\n\"threads\": [", f);
	for (uint32_t i = 0; i < x->nthreads; i++) {
		const struct cp_thread *t = &x->threads[i];
		fprintf(f, "%s{\"tid\": %llu, \"name\": ", i ? ", " : "",
			(unsigned long long)t->tid);
		jstr(f, t->name);
		fputs(", \"ttot\": ", f);
		jnum(f, t->ttot);
		fprintf(f, ", \"switches\": %llu}", (unsigned long long)t->switches);
	}
	fputs("],\n\"stacks\": [", f);
	for (uint32_t i = 0; i < x->nstacks; i++) {
		const struct cp_stack *s = &x->stacks[i];
		fprintf(f, "%s{\"task\": %lld, \"thread\": %llu, \"frames\": [", i ? ", " : "",
			(long long)s->task, (unsigned long long)s->thread);
		for (uint32_t j = 0; j < s->depth; j++) {
			fputs(j ? ", {" : "{", f);
			jkey(f, &p->stats.funcs[s->frames[j]].key);
			fputc('}', f);
		}
		fprintf(f, "], \"count\": %llu, \"waiting\": %s}", (unsigned long long)s->count,
			s->waiting ? "true" : "false");
	}
	fputs("]}}\n", f);
	return ferror(f) ? -EIO : 0;
}
