/* make-profile.c: writes a coprof file with extras for the viewer tests, until the
 * engine writes real ones: DESIGN's worked example under the wall clock (two ucontext
 * tasks on one thread), with its task and thread tables and, with --sample, stacks.
 * usage: make-profile OUT [--sample] [--scale K] (K multiplies every time). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"

enum { MAIN, A_ROOT, A_WORK, A_YIELD, B_ROOT, B_WORK, NFUNCS };

static const char *const names[NFUNCS] = {"main",    "a_root", "a_work",
					  "a_yield", "b_root", "b_work"};
static const double tt[NFUNCS] = {40, 10, 30, 40, 0, 20}; /* ms, the example's wall tt */
static const double ct[NFUNCS] = {100, 80, 30, 40, 20, 20};

static void *alloc(struct cp_profile *p, size_t n)
{
	void *v = cp_arena_alloc(p->arena, n);
	if (!v) {
		fprintf(stderr, "make-profile: out of memory\n");
		exit(1);
	}
	return v;
}

static const char *str(struct cp_profile *p, const char *s)
{
	return cp_arena_strdup(p->arena, s, strlen(s));
}

/* Fills `st` with the functions in `which` (indexes above), their edges a_root->a_work,
 * a_root->a_yield and b_root->b_work when both ends are present. */
static void fill_stats(struct cp_profile *p, struct cp_stats *st, const int *which, int n,
		       double scale)
{
	static const int edges[][2] = {{A_ROOT, A_WORK}, {A_ROOT, A_YIELD}, {B_ROOT, B_WORK}};
	int at[NFUNCS];
	for (int i = 0; i < NFUNCS; i++)
		at[i] = -1;
	st->funcs = alloc(p, (size_t)n * sizeof(*st->funcs));
	st->nfuncs = (uint32_t)n;
	for (int i = 0; i < n; i++) {
		struct cp_func *f = &st->funcs[i];
		int k = which[i];
		at[k] = i;
		f->key =
		    (struct cp_key){str(p, "sched.c"), (uint64_t)(10 * (k + 1)), str(p, names[k])};
		f->s = (struct cp_stat){1, 1, tt[k] * scale / 1e3, ct[k] * scale / 1e3};
	}
	for (size_t e = 0; e < sizeof(edges) / sizeof(edges[0]); e++) {
		int from = at[edges[e][0]], to = at[edges[e][1]];
		if (from < 0 || to < 0)
			continue;
		struct cp_func *f = &st->funcs[to];
		f->callers = alloc(p, sizeof(*f->callers));
		f->ncallers = 1;
		f->callers[0] = (struct cp_edge){(uint32_t)from, f->s};
	}
}

static void add_stack(struct cp_profile *p, int64_t task, const int *frames, uint32_t depth,
		      uint64_t count, int waiting)
{
	struct cp_stack *s = &p->ex.stacks[p->ex.nstacks++];
	s->task = task;
	s->thread = 4243;
	s->frames = alloc(p, depth * sizeof(*s->frames));
	for (uint32_t i = 0; i < depth; i++)
		s->frames[i] = (uint32_t)frames[i];
	s->depth = depth;
	s->count = count;
	s->waiting = (uint8_t)waiting;
}

int main(int argc, char **argv)
{
	int sample = 0;
	double scale = 1;
	const char *out = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sample"))
			sample = 1;
		else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			scale = atof(argv[++i]);
		else
			out = argv[i];
	}
	if (!out) {
		fprintf(stderr, "usage: make-profile OUT [--sample] [--scale K]\n");
		return 2;
	}
	struct cp_profile *p;
	if (cp_profile_new(&p)) {
		fprintf(stderr, "make-profile: cannot make a profile\n");
		return 1;
	}
	static const int all[] = {MAIN, A_ROOT, A_WORK, A_YIELD, B_ROOT, B_WORK};
	static const int ta[] = {A_ROOT, A_WORK, A_YIELD}, tb[] = {B_ROOT, B_WORK};
	fill_stats(p, &p->stats, all, NFUNCS, scale);

	struct cp_extras *ex = &p->ex;
	ex->present = 1;
	ex->version = CP_FORMAT_VERSION;
	ex->clock = str(p, "wall");
	ex->mode = str(p, sample ? "sample" : "trace");
	ex->pid = 4242;
	ex->argv = alloc(p, 2 * sizeof(*ex->argv));
	ex->argv[0] = str(p, "./sched");
	ex->argv[1] = str(p, "--demo");
	ex->argc = 2;
	ex->start = 1000.0;
	ex->stop = 1000.0 + 0.1 * scale;
	ex->hz = sample ? 1000 : 0;

	ex->tasks = alloc(p, 2 * sizeof(*ex->tasks));
	ex->ntasks = 2;
	ex->tasks[0] =
	    (struct cp_task){1, str(p, "task-a"),   str(p, "ucontext"), 4243, 0.080 * scale,
			     2, str(p, "finished"), {NULL, 0}, !sample, 0.030 * scale, 0.050 * scale,
			     0.012 * scale, 0.009 * scale, 0.018 * scale};
	ex->tasks[1] =
	    (struct cp_task){2, str(p, "task-b"),   str(p, "ucontext"), 4243, 0.020 * scale,
			     1, str(p, "finished"), {NULL, 0}, !sample, 0.020 * scale, 0.020 * scale,
			     0, 0, 0};
	fill_stats(p, &ex->tasks[0].stats, ta, 3, scale);
	fill_stats(p, &ex->tasks[1].stats, tb, 2, scale);

	ex->threads = alloc(p, sizeof(*ex->threads));
	ex->nthreads = 1;
	ex->threads[0] = (struct cp_thread){4243, str(p, "sched-main"), 0.100 * scale, 4, NULL, 0};

	if (!sample) { /* task-a's step at a_work, task-b's where it stopped */
		static const int st_a[] = {A_WORK, A_ROOT}, st_b[] = {B_ROOT};
		ex->stall_threshold = 0.020;
		ex->stalls = alloc(p, 2 * sizeof(*ex->stalls));
		ex->nstalls = 2;
		ex->stalls[0] = (struct cp_stall){4243, 2, str(p, "task-b"), 0.020 * scale, NULL, 1, 3};
		ex->stalls[1] = (struct cp_stall){4243, 1, str(p, "task-a"), 0.030 * scale, NULL, 2, 0};
		ex->stalls[0].frames = alloc(p, sizeof(struct cp_key));
		ex->stalls[0].frames[0] = p->stats.funcs[st_b[0]].key;
		ex->stalls[1].frames = alloc(p, 2 * sizeof(struct cp_key));
		for (int i = 0; i < 2; i++)
			ex->stalls[1].frames[i] = p->stats.funcs[st_a[i]].key;
	}
	if (!sample) { /* task-a awaited task-b, a gather's child, twice */
		ex->awaits = alloc(p, sizeof(*ex->awaits));
		ex->nawaits = 1;
		ex->awaits[0] = (struct cp_await){.thread = 4243,
						  .waiter_id = 1,
						  .waiter = str(p, "task-a"),
						  .awaited_id = 2,
						  .awaited = str(p, "task-b"),
						  .kind = str(p, "gather"),
						  .count = 2,
						  .seconds = 0.050 * scale};
	}
	if (sample) {
		static const int s_main[] = {MAIN}, s_awork[] = {A_WORK, A_ROOT},
				 s_aroot[] = {A_ROOT}, s_ayield[] = {A_YIELD, A_ROOT},
				 s_bwork[] = {B_WORK, B_ROOT};
		ex->stacks = alloc(p, 5 * sizeof(*ex->stacks));
		add_stack(p, -1, s_main, 1, 40, 0);
		add_stack(p, 0, s_awork, 2, 30, 0);
		add_stack(p, 0, s_aroot, 1, 10, 0);
		add_stack(p, 0, s_ayield, 2, 40, 1);
		add_stack(p, 1, s_bwork, 2, 20, 0);
	}
	int rc = cp_profile_write(p, out);
	cp_profile_free(p);
	if (rc) {
		fprintf(stderr, "make-profile: cannot write %s (%d)\n", out, rc);
		return 1;
	}
	return 0;
}
