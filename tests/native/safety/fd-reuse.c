/* fd-reuse.c: a program that closes every descriptor it did not open (fds 3-1023, as
 * a daemon does), opens files of its own on the freed low numbers, and puts more of
 * its files on the numbers a preloaded library would keep high (512-520), then raises
 * SIGUSR2 and forks a child that writes to all of them. Checks that every file holds
 * exactly what it wrote, and prints "files intact". `fd-reuse low` leaves the high
 * numbers alone. Between the two it recurses deep for 300 ms, so a sampler's unwinder
 * meets stack pages it has not seen (libunwind checks them through its pipe, which
 * sat on those high numbers). Run by tests/native/safety.py in the directory it may
 * write in. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NLOW 3
#define HIGH0 512
#define NHIGH 9

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* n frames of 200 bytes or more, then 1 ms of work at the bottom. */
__attribute__((noinline)) static unsigned long deep(int n)
{
	volatile char pad[200];
	pad[0] = (char)n;
	if (n == 0) {
		unsigned long x = 0;
		double until = now() + 0.001;
		while (now() < until)
			x++;
		return x;
	}
	return deep(n - 1) + (unsigned long)pad[0];
}

static int open_file(const char *name)
{
	return open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
}

static int check_file(const char *name, const char *want)
{
	char buf[256] = {0};
	int fd = open(name, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n < 0 || strcmp(buf, want) != 0) {
		printf("%s holds \"%s\", expected \"%s\"\n", name, buf, want);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int nhigh = argc > 1 && strcmp(argv[1], "low") == 0 ? 0 : NHIGH;
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	int fds[NLOW + NHIGH];
	char name[32];
	for (int i = 0; i < NLOW; i++) {
		snprintf(name, sizeof(name), "low%d", i);
		fds[i] = open_file(name);
	}
	for (int i = 0; i < nhigh; i++) {
		snprintf(name, sizeof(name), "high%d", i);
		int fd = open_file(name);
		fds[NLOW + i] = dup2(fd, HIGH0 + i);
		close(fd);
	}
	unsigned long sum = 0;
	double end = now() + 0.3;
	for (int k = 0; now() < end; k++)
		sum += deep(50 + k % 400);
	if (!sum)
		puts("no work done");
	raise(SIGUSR2); /* a toggle, if the profiler listens */
	usleep(100000);
	raise(SIGUSR2);
	usleep(100000);
	pid_t p = fork();
	if (p == 0) {
		int bad = 0;
		for (int i = 0; i < NLOW + nhigh; i++)
			if (write(fds[i], "child\n", 6) != 6) {
				printf("child: write(fd %d): %s\n", fds[i], strerror(errno));
				bad = 1;
			}
		_exit(bad);
	}
	int st = 0;
	waitpid(p, &st, 0);
	int bad = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	for (int i = 0; i < NLOW + nhigh; i++) {
		if (write(fds[i], "parent\n", 7) != 7) {
			printf("write(fd %d): %s\n", fds[i], strerror(errno));
			bad = 1;
		}
		close(fds[i]);
	}
	for (int i = 0; i < NLOW + nhigh; i++) {
		snprintf(name, sizeof(name), i < NLOW ? "low%d" : "high%d",
			 i < NLOW ? i : i - NLOW);
		bad |= check_file(name, "child\nparent\n");
	}
	printf(bad ? "files damaged\n" : "files intact\n");
	return bad;
}
