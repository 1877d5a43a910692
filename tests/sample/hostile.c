/* hostile.c MODE: a program that does what daemons and sandboxes do to their own process,
 * for the sample-mode cases that check coprof leaves it as it would be unprofiled.
 *
 *   closeall-thread  a busy thread runs; the program closes every descriptor above 2,
 *                    opens /dev/null FILES times, lets the thread exit, and checks by
 *                    fstat that each of its numbers is still its /dev/null
 *   closeall-fork    the same, checked in a fork child instead
 *   daemon           burns CPU in before_close(), closes every descriptor above 2, burns
 *                    CPU in after_close()
 *   seccomp-ioctl    a filter that kills on ioctl, then CPU in sandboxed()
 *   seccomp-perf     a filter that kills on perf_event_open, then a thread
 *   seccomp-raw      the same, installed with the bare syscall instruction (no libc
 *                    function a preloaded library could see)
 *
 * Prints what it found; exits 0 when every descriptor was still its own, 1 if not. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FILES 1100 /* past 1024, where the sampler keeps its events */

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) void burn(double s)
{
	double end = cpu_s() + s;
	volatile unsigned long n = 0;
	while (cpu_s() < end)
		n++;
}

static __attribute__((noinline)) void before_close(void)
{
	burn(0.3);
}

static __attribute__((noinline)) void after_close(void)
{
	burn(0.5);
}

static __attribute__((noinline)) void sandboxed(void)
{
	burn(0.4);
}

static void close_all(void)
{
	for (int fd = 3; fd < 65536; fd++)
		close(fd);
}

static volatile int stop;

static void *spin(void *arg)
{
	(void)arg;
	volatile unsigned long n = 0;
	while (!stop)
		n++;
	return NULL;
}

static void *worker(void *arg)
{
	(void)arg;
	sandboxed();
	return NULL;
}

static int files[FILES];
static struct stat null_id;

/* The number of files that are no longer the program's /dev/null, each printed. */
static int count_lost(const char *who)
{
	int lost = 0;
	for (int i = 0; i < FILES; i++) {
		struct stat sb;
		if (fstat(files[i], &sb) != 0) {
			printf("%s: fd %d closed\n", who, files[i]);
			lost++;
		} else if (sb.st_dev != null_id.st_dev || sb.st_ino != null_id.st_ino) {
			printf("%s: fd %d replaced\n", who, files[i]);
			lost++;
		}
	}
	if (!lost)
		printf("%s: %d fds still the program's\n", who, FILES);
	fflush(stdout);
	return lost;
}

static int closeall(int in_child)
{
	pthread_t t;
	pthread_create(&t, NULL, spin, NULL);
	usleep(100 * 1000);
	close_all();
	for (int i = 0; i < FILES; i++)
		if ((files[i] = open("/dev/null", O_RDONLY)) < 0) {
			perror("open");
			return 2;
		}
	fstat(files[0], &null_id);
	stop = 1;
	pthread_join(t, NULL);
	usleep(100 * 1000);
	if (!in_child)
		return count_lost("main") ? 1 : 0;
	pid_t pid = fork();
	if (pid == 0)
		_exit(count_lost("child") ? 1 : 0);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* A filter that kills the process for system call `nr`, and allows all else. */
static int forbid(int nr, int raw)
{
	struct sock_filter code[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	if (!raw)
		return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
	long rc;
	__asm__ volatile("syscall"
			 : "=a"(rc)
			 : "a"((long)SYS_seccomp), "D"((long)SECCOMP_SET_MODE_FILTER), "S"(0L),
			   "d"(&prog)
			 : "rcx", "r11", "memory");
	return rc == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (strcmp(mode, "closeall-thread") == 0)
		return closeall(0);
	if (strcmp(mode, "closeall-fork") == 0)
		return closeall(1);
	if (strcmp(mode, "daemon") == 0) {
		before_close();
		close_all();
		after_close();
		puts("done");
		return 0;
	}
	if (strncmp(mode, "seccomp-", 8) != 0) {
		fprintf(stderr, "usage: hostile closeall-thread|closeall-fork|daemon|"
				"seccomp-ioctl|seccomp-perf|seccomp-raw\n");
		return 2;
	}
	burn(0.1);
	/* stdio asks the kernel whether stdout is a terminal (ioctl) at its first write */
	puts("sandboxing");
	fflush(stdout);
	int ioctl_mode = strcmp(mode, "seccomp-ioctl") == 0;
	if (forbid(ioctl_mode ? SYS_ioctl : SYS_perf_event_open,
		   strcmp(mode, "seccomp-raw") == 0) != 0) {
		perror("seccomp");
		return 2;
	}
	if (ioctl_mode) {
		sandboxed();
	} else {
		pthread_t t;
		pthread_create(&t, NULL, worker, NULL);
		pthread_join(t, NULL);
	}
	puts("done");
	return 0;
}
