/* altstack.c: a program's own alternate signal stack under sample mode (run.py case
 * altstack). usage: altstack [SIZE]. A SIGUSR1 handler runs on an alternate stack of
 * SIZE bytes (8 KiB) for 0.3 s of CPU (SA_ONSTACK), so ticks land on it; 16 KiB of 0xAB
 * lie right below it. In the main thread, then in a second one. Prints, per thread,
 * whether sigaltstack showed an alternate stack before the program set one ("none", or
 * "set": AddressSanitizer's), the bytes below the stack that changed, and "view ok" when
 * sigaltstack then showed the program its own (on it, in the handler) and none after it
 * disabled it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "burn.h"

#define CANARY (16 * 1024)
static size_t alt = 8192; /* argv[1] */

static volatile int handler_saw_own;
static void *alt_sp;

static void handler(int s)
{
	(void)s;
	stack_t q;
	handler_saw_own = sigaltstack(NULL, &q) == 0 && q.ss_sp == alt_sp && q.ss_size == alt &&
			  q.ss_flags == SS_ONSTACK;
	burn(0.3);
}

static int disabled(void)
{
	stack_t q;
	return sigaltstack(NULL, &q) == 0 && q.ss_flags == SS_DISABLE && !q.ss_sp && !q.ss_size;
}

static void *run(void *name)
{
	unsigned char *block = malloc(CANARY + alt);
	memset(block, 0xAB, CANARY + alt);
	printf("%s: before: %s\n", (char *)name, disabled() ? "none" : "set");
	int view = 1;
	alt_sp = block + CANARY;
	stack_t ss = {.ss_sp = alt_sp, .ss_size = alt, .ss_flags = 0}, q;
	sigaltstack(&ss, NULL);
	view = view && sigaltstack(NULL, &q) == 0 && q.ss_sp == alt_sp && q.ss_size == alt &&
	       q.ss_flags == 0;
	burn(0.05);
	handler_saw_own = 0;
	raise(SIGUSR1);
	view = view && handler_saw_own;
	size_t bad = 0;
	for (size_t i = 0; i < CANARY; i++)
		if (block[i] != 0xAB)
			bad++;
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	view = view && disabled();
	printf("%s: %zu bytes below the alternate stack overwritten\n", (char *)name, bad);
	printf("%s: view %s\n", (char *)name, view ? "ok" : "wrong");
	free(block);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		alt = strtoul(argv[1], 0, 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	run("main");
	fflush(stdout);
	pthread_t t;
	pthread_create(&t, NULL, run, "thread");
	pthread_join(t, NULL);
	return 0;
}
