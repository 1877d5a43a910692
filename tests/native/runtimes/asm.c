/* asm.c: a coroutine runtime with its own x86-64 stack switch, which no adapter of
 * coprof knows: a heavy and a light coroutine on malloc'd stacks take turns with the
 * scheduler on the main stack. Built with -finstrument-functions; the switch and the
 * start trampoline are not instrumented (as in a real runtime's assembly). */
#include <stdio.h>
#include <stdlib.h>

#include "work.h"

/* Saves the callee-saved registers on the current stack, stores its pointer in *save,
 * and resumes the stack `to` (which was saved the same way, or made by rt_make). */
void rt_switch(void **save, void *to);
__asm__(".text\n"
	".globl rt_switch\n"
	".type rt_switch,@function\n"
	"rt_switch:\n"
	"\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
	"\tmovq %rsp, (%rdi)\n"
	"\tmovq %rsi, %rsp\n"
	"\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
	"\tret\n"
	".size rt_switch, .-rt_switch\n");

#define STACK_SIZE (256 * 1024)

struct coro {
	void *sp;
	void (*fn)(struct coro *);
	int done;
	double ms;
	int rounds;
	char *stack;
};

static void *sched_sp;
static struct coro *running;

static __attribute__((no_instrument_function, noreturn)) void start(void)
{
	struct coro *c = running;
	c->fn(c);
	c->done = 1;
	rt_switch(&c->sp, sched_sp);
	abort();
}

static __attribute__((no_instrument_function)) void rt_make(struct coro *c)
{
	c->stack = malloc(STACK_SIZE);
	if (!c->stack)
		abort();
	void **top = (void **)(((unsigned long)c->stack + STACK_SIZE) & ~15ul);
	*--top = NULL;		    /* start's return address: none */
	*--top = (void *)start;	    /* where rt_switch's ret goes */
	for (int i = 0; i < 6; i++) /* the six registers it pops */
		*--top = NULL;
	c->sp = top;
}

void task_yield(struct coro *c);
void task_yield(struct coro *c)
{
	rt_switch(&c->sp, sched_sp);
}

void heavy_work(double ms);
void heavy_work(double ms)
{
	rt_burn(ms, RT_HEAVY);
}

void light_work(double ms);
void light_work(double ms)
{
	rt_burn(ms, RT_LIGHT);
}

void heavy_task(struct coro *c);
void heavy_task(struct coro *c)
{
	for (int i = 0; i < c->rounds; i++) {
		heavy_work(c->ms);
		task_yield(c);
	}
}

void light_task(struct coro *c);
void light_task(struct coro *c)
{
	for (int i = 0; i < c->rounds; i++) {
		light_work(c->ms);
		task_yield(c);
	}
}

static void run(struct coro *cs, int n)
{
	for (int alive = n; alive;) {
		alive = 0;
		for (int i = 0; i < n; i++) {
			if (cs[i].done)
				continue;
			running = &cs[i];
			rt_switch(&sched_sp, cs[i].sp);
			alive += !cs[i].done;
		}
	}
}

int main(int argc, char **argv)
{
	struct rt_args a = rt_parse(argc, argv);
	struct coro cs[2] = {{.fn = heavy_task, .ms = a.heavy_ms, .rounds = a.rounds},
			     {.fn = light_task, .ms = a.light_ms, .rounds = a.rounds}};
	rt_make(&cs[0]);
	rt_make(&cs[1]);
	run(cs, 2);
	free(cs[0].stack);
	free(cs[1].stack);
	rt_report("asm", a.rounds);
	return 0;
}
