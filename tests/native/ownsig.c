/* ownsig.c: a program that uses the toggle signal itself (instrumented). It installs
 * a SIGUSR2 handler with sigaction (or signal, with argument "signal"), raises
 * SIGUSR2 three times and prints how many it caught. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t caught;

static void on_usr2(int sig)
{
	caught++;
}

static void work(void)
{
	raise(SIGUSR2);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "signal")) {
		signal(SIGUSR2, on_usr2);
	} else {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr2;
		sigaction(SIGUSR2, &sa, NULL);
	}
	for (int i = 0; i < 3; i++)
		work();
	printf("ownsig: caught %d\n", (int)caught);
	return 0;
}
