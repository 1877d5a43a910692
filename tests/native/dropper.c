/* dropper.c: a root-started master whose forked workers drop their privileges, as
 * nginx's or php-fpm's do (instrumented). usage: dropper NWORKERS MS UID [how]
 *
 * The master forks NWORKERS children. Each clears its supplementary groups (as
 * root), calls setgid(UID) and setuid(UID) (how = "setuid", the default) or
 * setresgid/setresuid ("setres"; "seccomp": setgid/setuid under a seccomp filter
 * that kills at execve), checks that it has no child (wait() returns
 * ECHILD), prints "worker I PID uid U", then burns MS ms of CPU in calls of 10 ms to
 * a function of its own (work_0 .. work_3), and leaves: even workers return from main
 * (exit(3)), odd ones call _exit(2). The master waits for all of them, then works in
 * master_work. With MS negative, a worker works until stdin closes (the toggle
 * tests). */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void spin(double seconds)
{
	double end = cpu_s() + seconds;
	while (cpu_s() < end)
		for (int i = 0; i < 10000; i++)
			sink += (uint64_t)i * 7;
}

/* One function per worker, so each file shows whose work it holds. */
static void work_0(double s)
{
	spin(s);
}

static void work_1(double s)
{
	spin(s);
}

static void work_2(double s)
{
	spin(s);
}

static void work_3(double s)
{
	spin(s);
}

static void master_work(double s)
{
	spin(s);
}

static void (*const works[4])(double) = {work_0, work_1, work_2, work_3};

/* With stdin open, slices of work until it closes (the test toggles meanwhile). */
static void work_until_eof(int i)
{
	char c;
	for (;;) {
		fd_set r;
		FD_ZERO(&r);
		FD_SET(0, &r);
		struct timeval tv = {0, 0};
		if (select(1, &r, NULL, NULL, &tv) > 0 && read(0, &c, 1) <= 0)
			return;
		works[i](0.01);
	}
}

/* A seccomp filter that kills the process at any execve (a sandbox's kind): the shim
 * must not start its keeper there. */
static int forbid_exec(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static int drop(unsigned id, const char *how)
{
	if (strcmp(how, "seccomp") == 0 && forbid_exec() != 0)
		return -1;
	if (geteuid() == 0 && setgroups(0, NULL) != 0) /* only root may, and needs to */
		return -1;
	if (strcmp(how, "setres") == 0)
		return setresgid(id, id, id) || setresuid(id, id, id) ? -1 : 0;
	return setgid(id) || setuid(id) ? -1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int n = atoi(argv[1]);
	double s = atoi(argv[2]) / 1000.0;
	unsigned id = (unsigned)atoi(argv[3]);
	const char *how = argc > 4 ? argv[4] : "setuid";
	if (n < 1 || n > 4)
		return 2;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid > 0)
			continue;
		if (drop(id, how) != 0) {
			perror("drop");
			_exit(3);
		}
		/* No child of coprof's for the program to see: a wait() for all children
		 * returns at once (a keeper as a child would keep it waiting). */
		if (wait(NULL) != -1 || errno != ECHILD) {
			printf("worker %d has a child it did not make\n", i);
			_exit(4);
		}
		printf("worker %d %d uid %d\n", i, (int)getpid(), (int)getuid());
		fflush(stdout);
		if (s < 0)
			work_until_eof(i);
		else /* in 10 ms calls, so that every window holds some whole */
			for (double done = 0; done < s; done += 0.01)
				works[i](0.01);
		if (i % 2)
			_exit(0);
		return 0;
	}
	int bad = 0;
	for (int i = 0; i < n; i++) {
		int st;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	}
	master_work(s < 0 ? 0.05 : s);
	return bad;
}
