/* execer.c: exec under the shim (instrumented). `execer MODE PROG A1 A2 A3` works,
 * prints "execer: MODE", then replaces itself with PROG A1 A2 A3 through the exec
 * function MODE names (execv, execve, execvp, execvpe, execl, execle, execlp,
 * fexecve, execveat). MODE "fail" first tries to exec a path that does not exist,
 * then works again and exits 0, printing the exec's errno. MODE "search" looks for
 * PROG as os.execvp does: it tries execv in each folder of PATH in turn, working in
 * after_failed_exec after each that fails, until one runs PROG A1 A2 A3. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static volatile uint64_t sink;

static void before_exec(void)
{
	for (int i = 0; i < 200000; i++)
		sink += (uint64_t)i;
}

static void after_failed_exec(void)
{
	for (int i = 0; i < 200000; i++)
		sink ^= (uint64_t)i;
}

static int run(const char *mode, char **cmd)
{
	if (!strcmp(mode, "execv"))
		return execv(cmd[0], cmd);
	if (!strcmp(mode, "execve"))
		return execve(cmd[0], cmd, environ);
	if (!strcmp(mode, "execvp"))
		return execvp(cmd[0], cmd);
	if (!strcmp(mode, "execvpe"))
		return execvpe(cmd[0], cmd, environ);
	if (!strcmp(mode, "execl"))
		return execl(cmd[0], cmd[0], cmd[1], cmd[2], cmd[3], (char *)NULL);
	if (!strcmp(mode, "execle"))
		return execle(cmd[0], cmd[0], cmd[1], cmd[2], cmd[3], (char *)NULL, environ);
	if (!strcmp(mode, "execlp"))
		return execlp(cmd[0], cmd[0], cmd[1], cmd[2], cmd[3], (char *)NULL);
	if (!strcmp(mode, "fexecve")) {
		int fd = open(cmd[0], O_RDONLY | O_CLOEXEC);
		return fd < 0 ? -1 : fexecve(fd, cmd, environ);
	}
	if (!strcmp(mode, "execveat"))
		return execveat(AT_FDCWD, cmd[0], cmd, environ, 0);
	fprintf(stderr, "execer: unknown mode %s\n", mode);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: execer MODE PROG A1 A2 A3\n");
		return 2;
	}
	before_exec();
	printf("execer: %s\n", argv[1]);
	fflush(stdout);
	if (!strcmp(argv[1], "fail")) {
		char *missing[] = {"/nonexistent/execer-target", NULL};
		int rc = execv(missing[0], missing);
		int err = errno;
		after_failed_exec();
		printf("execer: exec returned %d, %s\n", rc, strerror(err));
		return 0;
	}
	if (!strcmp(argv[1], "search")) {
		char *path = getenv("PATH"), *save = NULL, file[4096];
		const char *name = argv[2];
		argv[2] = file;
		for (char *dir = strtok_r(path, ":", &save); dir;
		     dir = strtok_r(NULL, ":", &save)) {
			snprintf(file, sizeof(file), "%s/%s", dir, name);
			execv(file, argv + 2);
			after_failed_exec();
		}
	} else {
		run(argv[1], argv + 2);
	}
	perror("execer");
	return 127;
}
