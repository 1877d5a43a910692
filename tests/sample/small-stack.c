/* small-stack.c: coroutines on small stacks under sample mode (run.py case small-stack).
 *
 * usage: small-stack USE. A makecontext coroutine on a 32 KiB mmap'ed stack with a
 * guard page uses USE KiB of it (a VLA) and burns 0.3 s of CPU there, so ticks land with
 * 32 - USE KiB left; in the main thread, in a second thread and in a fork child, each
 * printing "ok WHERE" (a tick that overflows the stack ends the process on SIGSEGV).
 * Then 20 threads start and end one after the other: "maps kept" when the process has
 * as many mappings as after the first (a thread leaves nothing mapped behind it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "burn.h"

#define STACK (32 * 1024)

static __thread ucontext_t back, co;
static size_t use; /* bytes of stack the coroutine uses below its entry */

__attribute__((noinline)) static void deep(void)
{
	volatile char pad[use];
	memset((char *)pad, 1, use);
	burn(0.3);
	pad[0]++;
}

static void entry(void)
{
	deep();
}

static void *coroutine(void *where)
{
	char *m =
	    mmap(NULL, STACK + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mprotect(m, 4096, PROT_NONE);
	getcontext(&co);
	co.uc_stack.ss_sp = m + 4096;
	co.uc_stack.ss_size = STACK;
	co.uc_link = &back;
	makecontext(&co, entry, 0);
	swapcontext(&back, &co);
	munmap(m, STACK + 4096);
	printf("ok %s\n", (char *)where);
	fflush(stdout);
	return NULL;
}

static void *nothing(void *arg)
{
	return arg;
}

static int mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	use = strtoul(argv[1], 0, 0) * 1024;
	coroutine("main");
	pthread_t t;
	pthread_create(&t, NULL, coroutine, "thread");
	pthread_join(t, NULL);
	pid_t pid = fork();
	if (pid == 0) {
		coroutine("child");
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		printf("child ended with status %#x\n", status);
	pthread_create(&t, NULL, nothing, NULL);
	pthread_join(t, NULL);
	int before = mappings();
	for (int i = 0; i < 20; i++) {
		pthread_create(&t, NULL, nothing, NULL);
		pthread_join(t, NULL);
	}
	int after = mappings();
	if (after == before)
		printf("maps kept\n");
	else
		printf("maps: %d after the first thread, %d after 20 more\n", before, after);
	return 0;
}
