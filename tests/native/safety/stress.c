/* stress.c: the shapes of tests/native/safety/ at once, for `seconds` (argv[1], default
 * 2.5), while the test sends toggles: two threads that pass four coroutines between
 * them (every resume may be on the other thread), and a main thread that closes its
 * low descriptors, then loops over a uc_link chain, a setcontext to a getcontext
 * point, resets of every signal, blocks and unblocks of every signal, and now and then
 * a fork whose child writes a file and leaves through _exit. Prints "stress done" and
 * exits 0 when every piece did what it should. Run by tests/native/safety.py. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define NCORO 4
#define STACK (128 * 1024)

struct coro {
	ucontext_t uc;
	ucontext_t *home; /* the scheduler that resumed it last, on whichever thread */
	int running;
	unsigned long resumes;
};

static struct coro coros[NCORO];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop;
static double deadline;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void burn_us(int us)
{
	double t = now();
	volatile unsigned long x = 0;
	while (now() - t < us * 1e-6)
		x++;
}

static void coro_entry(int i)
{
	for (;;) {
		burn_us(200);
		coros[i].resumes++;
		swapcontext(&coros[i].uc, coros[i].home);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	ucontext_t sched;
	unsigned n = 0;
	while (!stop) {
		struct coro *c = NULL;
		pthread_mutex_lock(&lock);
		for (int k = 0; k < NCORO && !c; k++) {
			struct coro *t = &coros[(n + (unsigned)k) % NCORO];
			if (!t->running)
				c = t;
		}
		if (c)
			c->running = 1;
		pthread_mutex_unlock(&lock);
		n++;
		if (!c)
			continue;
		c->home = &sched;
		swapcontext(&sched, &c->uc);
		pthread_mutex_lock(&lock);
		c->running = 0;
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static ucontext_t main_uc, a_uc, b_uc, b_saved, s_uc, s_back;

static void chain_a(void)
{
	burn_us(300);
}

static void chain_b(void)
{
	swapcontext(&b_saved, &a_uc); /* resumed by a's uc_link */
	burn_us(300);
}

static void stuck_entry(void)
{
	burn_us(300);
	setcontext(&s_back);
}

static void make(ucontext_t *uc, char *stack, ucontext_t *link, void (*fn)(void))
{
	getcontext(uc);
	uc->uc_stack.ss_sp = stack;
	uc->uc_stack.ss_size = STACK;
	uc->uc_link = link;
	makecontext(uc, fn, 0);
}

static int fork_write(int round)
{
	char name[32];
	snprintf(name, sizeof(name), "child%d", round);
	int fd = open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
	pid_t p = fork();
	if (p == 0)
		_exit(write(fd, "child\n", 6) == 6 ? 0 : 1);
	int st = 0;
	waitpid(p, &st, 0);
	char buf[16] = {0};
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(name);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == 6 && strcmp(buf, "child\n") == 0;
}

int main(int argc, char **argv)
{
	static char stacks[NCORO + 3][STACK];
	deadline = now() + (argc > 1 ? atof(argv[1]) : 2.5);
	for (int fd = 3; fd < 64; fd++)
		close(fd);
	for (int i = 0; i < NCORO; i++) {
		getcontext(&coros[i].uc);
		coros[i].uc.uc_stack.ss_sp = stacks[i];
		coros[i].uc.uc_stack.ss_size = STACK;
		coros[i].uc.uc_link = NULL;
		makecontext(&coros[i].uc, (void (*)(void))coro_entry, 1, i);
	}
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	volatile int bad = 0, rounds = 0; /* kept across the setcontext below */
	while (now() < deadline) {
		make(&b_uc, stacks[NCORO], &main_uc, chain_b);
		make(&a_uc, stacks[NCORO + 1], &b_saved, chain_a);
		swapcontext(&main_uc, &b_uc);
		volatile int back = 0;
		make(&s_uc, stacks[NCORO + 2], NULL, stuck_entry);
		getcontext(&s_back);
		if (!back) {
			back = 1;
			setcontext(&s_uc);
		}
		for (int s = 1; s <= SIGRTMAX; s++)
			if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD &&
			    (s < 32 || s >= SIGRTMIN))
				signal(s, SIG_DFL);
		sigset_t all, old;
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, &old);
		burn_us(500);
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (rounds % 16 == 0 && !fork_write(rounds)) {
			printf("round %d: the child's write was lost\n", rounds);
			bad = 1;
		}
		rounds++;
	}
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	unsigned long resumes = 0;
	for (int i = 0; i < NCORO; i++)
		resumes += coros[i].resumes;
	if (rounds < 1 || resumes < 10) {
		printf("only %d rounds, %lu resumes\n", rounds, resumes);
		bad = 1;
	}
	if (!bad)
		printf("stress done\n");
	return bad;
}
