/* cloner.c MODE: a child process made without glibc's fork (instrumented), as
 * container runtimes and sandboxes make them: MODE "raw" is syscall(SYS_clone) with
 * fork's semantics, the child leaving through _exit; "exit" the same, leaving through
 * exit() (atexit handlers and destructors run); "wrapper" is glibc's clone() without
 * CLONE_VM, the child running on a stack of its own. The child calls child_work() 100
 * times and exits with status 3. Prints how the child exited; exit 0 when with 3. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static int child_work(int n)
{
	volatile int s = 0;
	for (int i = 0; i < n; i++)
		s += i;
	return s;
}

static int child(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++)
		child_work(1000);
	return 3;
}

static char stack[256 * 1024] __attribute__((aligned(16)));

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "wrapper";
	pid_t p;
	if (strcmp(mode, "raw") == 0 || strcmp(mode, "exit") == 0) {
		p = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (p == 0) {
			int st = child(NULL);
			if (strcmp(mode, "exit") == 0)
				exit(st);
			_exit(st);
		}
	} else {
		p = clone(child, stack + sizeof(stack), SIGCHLD, NULL);
	}
	if (p < 0) {
		perror("clone");
		return 2;
	}
	int st;
	if (waitpid(p, &st, 0) != p) {
		perror("waitpid");
		return 2;
	}
	if (WIFEXITED(st))
		printf("child exited with status %d\n", WEXITSTATUS(st));
	else
		printf("child killed by signal %d\n", WTERMSIG(st));
	return WIFEXITED(st) && WEXITSTATUS(st) == 3 ? 0 : 1;
}
