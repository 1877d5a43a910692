/* st.c: State Threads (libst): a heavy and a light st thread take turns through
 * st_usleep, which switches with State Threads' own setjmp-style code, no adapter of
 * coprof's. Built with -finstrument-functions. */
#include <st.h>
#include <stdio.h>

#include "work.h"

static struct rt_args args;

void task_yield(void);
void task_yield(void)
{
	st_usleep(1000);
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

void *heavy_task(void *arg);
void *heavy_task(void *arg)
{
	for (int i = 0; i < args.rounds; i++) {
		heavy_work(args.heavy_ms);
		task_yield();
	}
	return arg;
}

void *light_task(void *arg);
void *light_task(void *arg)
{
	for (int i = 0; i < args.rounds; i++) {
		light_work(args.light_ms);
		task_yield();
	}
	return arg;
}

int main(int argc, char **argv)
{
	args = rt_parse(argc, argv);
	if (st_init() < 0) {
		perror("st_init");
		return 1;
	}
	st_thread_t h = st_thread_create(heavy_task, NULL, 1, 0);
	st_thread_t l = st_thread_create(light_task, NULL, 1, 0);
	if (!h || !l) {
		perror("st_thread_create");
		return 1;
	}
	st_thread_join(h, NULL);
	st_thread_join(l, NULL);
	rt_report("st", args.rounds);
	return 0;
}
