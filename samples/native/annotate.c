/* annotate.c: a runtime with its own switch code (no ucontext) that tells coprof about
 * its switches through the public API: coprof_task_switch and coprof_task_finish act
 * on the default profiler, which the preload shim sets; without it they do nothing.
 *
 * usage: annotate [STEPS]
 * Two state-machine tasks, "fetch" and "parse", are stepped in turn by a loop; each
 * step of fetch calls fetch_step() once, each step of parse calls parse_step() once. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "coprof.h"

struct task {
	uint64_t id;
	const char *name;
	void (*step)(struct task *);
	int left;
	volatile uint64_t acc;
};

static void fetch_step(struct task *t)
{
	for (int i = 0; i < 100000; i++)
		t->acc += (uint64_t)i;
}

static void parse_step(struct task *t)
{
	for (int i = 0; i < 200000; i++)
		t->acc ^= (uint64_t)i * 3;
}

/* One step of `t` in its own profiling context, then back to the loop's. */
static void run_step(struct task *t)
{
	coprof_task_switch(t->id, t->name);
	t->step(t);
	coprof_task_switch(0, NULL);
	if (--t->left == 0)
		coprof_task_finish(t->id);
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 5;
	struct task tasks[2] = {
	    {1, "fetch", fetch_step, steps, 0},
	    {2, "parse", parse_step, steps, 0},
	};
	int alive = 2;
	while (alive > 0) {
		alive = 0;
		for (int i = 0; i < 2; i++)
			if (tasks[i].left > 0) {
				run_step(&tasks[i]);
				alive++;
			}
	}
	printf("annotate: 2 tasks x %d steps\n", steps);
	return 0;
}
