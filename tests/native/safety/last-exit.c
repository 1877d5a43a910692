/* last-exit.c: a process ends when its last thread does. main starts a worker and
 * leaves through pthread_exit; the worker forks, and in the child the forking thread
 * (the child's only one) returns from its start routine, which must end the child
 * with status 0; the parent's worker waits for that (10 s at most), prints what it
 * saw and returns, which must end the process with status 0. Under a preloaded
 * profiler whose own threads outlive them, both would hang. Run by
 * tests/native/safety.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void *worker(void *arg)
{
	(void)arg;
	pid_t p = fork();
	if (p == 0)
		return NULL; /* the child's last thread: the child ends here */
	int st = 0, waited = 0;
	for (int i = 0; i < 1000 && !waited; i++) {
		waited = waitpid(p, &st, WNOHANG) == p;
		if (!waited)
			usleep(10000);
	}
	if (!waited) {
		kill(p, SIGKILL);
		waitpid(p, &st, 0);
		printf("child still running after 10 s\n");
	} else {
		printf("child ended: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	printf("worker done\n");
	fflush(stdout);
	return NULL;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	pthread_exit(NULL);
}
