/* late.c: a library the attach target loads after the attach (target.c's order
 * "dlopen"), for attach.py's case dlopen-thread. late_bound() says whether this
 * library's calls of pthread_create go to the shim's (its GOT entry bound since it was
 * loaded); late_start() starts a thread that spins in late_spin for ever. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

void late_spin(void);
int late_bound(void);
int late_start(void);

static volatile unsigned long sink;

__attribute__((noinline)) void late_spin(void)
{
	unsigned long x = sink + 7;
	for (int i = 0; i < 100000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	sink = x;
}

static void *late_main(void *arg)
{
	(void)arg;
	for (;;)
		late_spin();
	return NULL;
}

int late_bound(void)
{
	Dl_info info;
	void *fn = (void *)&pthread_create; /* the GOT's entry: the shim's once bound */
	return dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "coprof") != NULL;
}

int late_start(void)
{
	pthread_t t;
	return pthread_create(&t, NULL, late_main, NULL);
}
