/* reaper.c: a process that takes orphans and waits for all its children, as tini,
 * dumb-init or a container's pid 1 do, with privileges dropped (instrumented). usage:
 * reaper HOW UID, run as root.
 *
 * HOW "self": makes itself a child subreaper, drops to UID (setgroups, setgid,
 * setuid), forks a worker; "late": drops first, then becomes a subreaper and forks;
 * "child": becomes a subreaper and forks a worker that drops (the reaper stays root);
 * "plain": drops and forks, taking no orphans unless it is pid 1 of a pid namespace.
 * The worker works in worker_work and exits 0; the reaper works in reaper_work, then
 * reaps until wait() says ECHILD, and prints "worker PID", "reaped PID" for each child
 * and "no children left". A child it did not fork makes it exit 3. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile uint64_t sink;

static void worker_work(void)
{
	for (int i = 0; i < 2000000; i++)
		sink += (uint64_t)i;
}

static void reaper_work(void)
{
	for (int i = 0; i < 2000000; i++)
		sink ^= (uint64_t)i;
}

static int drop(gid_t id)
{
	return setgroups(0, NULL) || setgid(id) || setuid(id) ? -1 : 0;
}

static int subreaper(void)
{
	return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	const char *how = argv[1];
	gid_t id = (gid_t)atoi(argv[2]);
	if ((!strcmp(how, "self") || !strcmp(how, "child")) && subreaper() != 0)
		return 2;
	if (strcmp(how, "child") && drop(id) != 0) {
		perror("reaper: drop");
		return 2;
	}
	if (!strcmp(how, "late") && subreaper() != 0)
		return 2;
	pid_t w = fork();
	if (w < 0)
		return 2;
	if (w == 0) {
		if (!strcmp(how, "child") && drop(id) != 0)
			_exit(2);
		worker_work();
		_exit(0);
	}
	printf("worker %d\n", (int)w);
	fflush(stdout);
	reaper_work();
	pid_t p;
	int st, bad = 0;
	while ((p = wait(&st)) > 0) {
		printf("reaped %d\n", (int)p);
		bad |= p != w || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	printf("no children left%s\n", errno == ECHILD ? "" : " (?)");
	return bad ? 3 : 0;
}
