/* vforker.c: vfork children under the shim (instrumented). Each of 20 children runs
 * instrumented code (setup_and_exec), installs a SIGUSR2 handler of its own (the
 * shim's toggle signal) and execs /bin/true; every other child first leaves through
 * _exit(127) after an exec that fails. Then main calls work() 1,000 times. Prints how
 * the children exited. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void on_usr2(int sig)
{
	(void)sig;
}

__attribute__((noinline)) static void setup_and_exec(int fail)
{
	signal(SIGUSR2, on_usr2);
	char *argv[] = {"true", NULL};
	execve(fail ? "/nonexistent/true" : "/bin/true", argv, environ);
	_exit(127);
}

__attribute__((noinline)) static int work(int n)
{
	volatile int s = 0;
	for (int i = 0; i < n; i++)
		s += i;
	return s;
}

int main(void)
{
	int ok = 0, failed = 0, other = 0;
	for (int i = 0; i < 20; i++) {
		pid_t p = vfork();
		if (p == 0)
			setup_and_exec(i % 2);
		int st;
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st))
			other++;
		else if (WEXITSTATUS(st) == 0)
			ok++;
		else if (WEXITSTATUS(st) == 127)
			failed++;
		else
			other++;
	}
	for (int i = 0; i < 1000; i++)
		work(1000);
	printf("children: %d exited 0, %d exited 127, %d otherwise\n", ok, failed, other);
	return 0;
}
