/* forker.c: fork and exec under the shim (instrumented). The parent works, forks a
 * child that works on its own and exits, then forks a child that execs ARGV[1..]
 * (when given), and works again. Prints "child PID" for each child and the exit status
 * of each (under ASan a leak report would make the worker's 23). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile uint64_t sink;

static void parent_work(void)
{
	for (int i = 0; i < 100000; i++)
		sink += (uint64_t)i;
}

static void child_work(void)
{
	for (int i = 0; i < 100000; i++)
		sink ^= (uint64_t)i;
}

static void spawn_worker(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 3; i++)
			child_work();
		exit(0);
	}
	printf("child %d\n", (int)pid);
	fflush(stdout);
	int status;
	waitpid(pid, &status, 0);
	printf("worker status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void spawn_exec(char **argv)
{
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	printf("child %d\n", (int)pid);
	fflush(stdout);
	int status;
	waitpid(pid, &status, 0);
	printf("exec status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

int main(int argc, char **argv)
{
	parent_work();
	fflush(stdout);
	spawn_worker();
	if (argc > 1)
		spawn_exec(argv + 1);
	parent_work();
	return 0;
}
