/* sig-wait.c: a program that blocks SIGTERM (and then every signal) and waits for its
 * signals with sigwait: first SIGTERM sent to the process, then, with everything
 * blocked, SIGUSR1 sent by a thread of its own 300 ms later while the main thread sits
 * in sigwait on the full set (where a profiler's ticks could be taken instead). Prints
 * what sigwait returned. Run by tests/native/safety.py. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static void *later(void *arg)
{
	(void)arg;
	usleep(300000);
	kill(getpid(), SIGUSR1);
	return NULL;
}

int main(void)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	usleep(50000);
	kill(getpid(), SIGTERM);
	int sig = 0;
	sigwait(&s, &sig);
	printf("first %d\n", sig);
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_t t;
	pthread_create(&t, NULL, later, NULL);
	sigwait(&all, &sig);
	printf("second %d\n", sig);
	pthread_join(t, NULL);
	printf("clean shutdown\n");
	return 0;
}
