/* seccomp.c: the ways a program installs a seccomp filter (prctl, and syscall() with
 * SYS_seccomp, which libseccomp uses), interposed so that the shim learns of a filter
 * before it goes in: a filter may kill the process for a system call of the shim's the
 * program never makes itself (a new thread's perf page, the sampler's ioctl). Runs on whichever
 * thread calls; syscall() also in the shim's own signal handlers, so the calls themselves are made
 * with the syscall instruction, as glibc's wrappers do, with no lookup first. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "service.h"

#if defined(__x86_64__)
/* The interposers below make their system calls with the syscall instruction; other
 * architectures have no such wrapper here, and a filter is then found only as a thread
 * starts (pl_seccomp_filtered). */

/* async-signal-safe: the system call `nr`, -1 and errno on failure. */
static long raw_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long rc;
	__asm__ volatile("syscall"
			 : "=a"(rc)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if ((unsigned long)rc > -4096ul) {
		errno = (int)-rc;
		return -1;
	}
	return rc;
}
#endif

/* async-signal-safe: the calling thread runs under a seccomp filter or in strict mode
 * (/proc/thread-self/status: "Seccomp:" other than 0). Filters are per thread and
 * inherited: a thread has its creator's. Three system calls any program that reads a
 * file makes: once per thread start, not per tick. */
int pl_seccomp_filtered(void)
{
	char buf[4096];
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *line = strstr(buf, "\nSeccomp:");
	if (!line)
		return 0;
	line += strlen("\nSeccomp:");
	while (*line == ' ' || *line == '\t')
		line++;
	return *line == '1' || *line == '2';
}

#if defined(__x86_64__)
/* Whether system call `nr` with first argument `op` installs a filter or strict mode. */
static int installs_filter(long nr, long op)
{
	if (nr == SYS_prctl)
		return op == PR_SET_SECCOMP;
	if (nr == SYS_seccomp)
		return op == SECCOMP_SET_MODE_STRICT || op == SECCOMP_SET_MODE_FILTER;
	return 0;
}

/* Before a filter goes in: new threads' clocks open no perf page (the engine's TSC
 * clock does, in either mode), and the runtimes step back (the sampler). */
static void filter_coming(void)
{
	if (pl_prof)
		coprof_clock_no_perf(pl_cfg.clock);
	pl_runtimes_sandbox("the program installed a seccomp filter");
}

PL_EXPORT int prctl(int option, ...)
{
	va_list ap;
	va_start(ap, option);
	unsigned long a[4];
	for (int i = 0; i < 4; i++)
		a[i] = va_arg(ap, unsigned long);
	va_end(ap);
	if (installs_filter(SYS_prctl, option))
		filter_coming();
	return (int)raw_syscall(SYS_prctl, option, (long)a[0], (long)a[1], (long)a[2], (long)a[3],
				0);
}

/* Reads six arguments whatever the call takes, as the kernel does: the last may lie
 * in the caller's frame past what it passed, which AddressSanitizer would flag. */
__attribute__((no_sanitize("address"))) PL_EXPORT long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (installs_filter(nr, a[0]))
		filter_coming();
	return raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

#endif
