/* sweep.c: linked into resp-10k (bench/fleet) beside the RESP sample: a thread started
 * before main calls each of the 10,000 generated functions (funcs10k.c) every 100 ms,
 * so every profile window holds 10,000 functions besides the server's own. The thread
 * is named "sweep", so that windows.py can leave its CPU out of the server's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

int gen_fn_call(int i, int x);
extern const int gen_nfuncs;

static void *sweep(void *arg)
{
	volatile int acc = 0;
	(void)arg;
	for (;;) {
		for (int i = 0; i < gen_nfuncs; i++)
			acc += gen_fn_call(i, acc);
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

__attribute__((constructor)) static void sweep_start(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, sweep, NULL) == 0) {
		pthread_setname_np(t, "sweep");
		pthread_detach(t);
	}
}
