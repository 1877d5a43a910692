/* sig-reset.c: a daemon-style program that resets every signal to SIG_DFL, by each of
 * the calls a program may use, and blocks every signal in the main thread, then burns
 * CPU in spin_after_reset. `insist` instead installs a handler of its own on every
 * catchable signal and checks they all stay installed and are called. Prints what it
 * saw; exits 1 when the view it is given is wrong. Run by tests/native/safety.py. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t got[65];

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void spin_after_reset(double s)
{
	double t = cpu_now();
	volatile unsigned long x = 0;
	while (cpu_now() - t < s)
		x++;
}

static void count(int sig)
{
	got[sig]++;
}

static int catchable(int s)
{
	return s != SIGKILL && s != SIGSTOP && s != SIGSEGV && s != SIGBUS && s != SIGILL &&
	       s != SIGFPE && (s < 32 || s >= SIGRTMIN);
}

static int insist(void)
{
	int bad = 0;
	for (int s = 1; s <= SIGRTMAX; s++) {
		if (!catchable(s))
			continue;
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = count;
		sigemptyset(&sa.sa_mask);
		if (sigaction(s, &sa, NULL) != 0)
			bad++;
	}
	spin_after_reset(0.2);
	for (int s = 1; s <= SIGRTMAX; s++) {
		struct sigaction cur;
		if (!catchable(s) || s == SIGCHLD || s == SIGWINCH || s == SIGURG)
			continue;
		if (sigaction(s, NULL, &cur) != 0 || cur.sa_handler != count) {
			printf("signal %d: not my handler\n", s);
			bad++;
			continue;
		}
		raise(s);
		if (got[s] != 1) {
			printf("signal %d: my handler ran %d times\n", s, (int)got[s]);
			bad++;
		}
	}
	printf("insisted: %d wrong\n", bad);
	return bad != 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "insist") == 0)
		return insist();
	int bad = 0;
	for (int s = 1; s <= SIGRTMAX; s++) {
		if (s == SIGKILL || s == SIGSTOP || (s > 31 && s < SIGRTMIN))
			continue; /* glibc keeps the two below SIGRTMIN */
		struct sigaction dfl, old;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		switch (s % 3) {
		case 0:
			signal(s, SIG_DFL);
			break;
		case 1:
			sigaction(s, &dfl, NULL);
			break;
		default:
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
			sigset(s, SIG_DFL); /* old, and still used to reset */
#pragma GCC diagnostic pop
		}
		if (sigaction(s, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
			bad++;
	}
	sigset_t all, seen;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	sigprocmask(SIG_SETMASK, NULL, &seen);
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		bad += sigismember(&seen, s) != 1;
	spin_after_reset(0.5);
	printf("reset: %d wrong\nsurvived\n", bad);
	return bad != 0;
}
