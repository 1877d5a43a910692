/* exit-handler.c: leaves through _exit(3) from a SIGALRM handler that interrupts the
 * main thread in malloc or free, 30 ms in. Must exit at once with status 3. Run by
 * tests/native/safety.py. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static void on_alarm(int sig)
{
	(void)sig;
	_exit(3);
}

__attribute__((noinline)) static void churn(void)
{
	void *p[64];
	for (int i = 0; i < 64; i++) {
		p[i] = malloc(16 + (size_t)i * 97);
		memset(p[i], 1, 16);
	}
	for (int i = 0; i < 64; i++)
		free(p[i]);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	struct itimerval it = {{0, 0}, {0, 30000}};
	setitimer(ITIMER_REAL, &it, NULL);
	for (;;)
		churn();
}
