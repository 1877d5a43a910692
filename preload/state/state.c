/* state.c: the state every layer of the shim reads (state.h): the configuration, the
 * process's profiler and its flags, the per-thread state, the real functions behind the
 * interposers, and pl_say. The constructor (lifecycle/) fills it before the program
 * runs; hooks read it in any thread. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "state.h"

struct pl_config pl_cfg;
struct coprof *pl_prof;
struct pl_reals pl_real;
int pl_active;
int pl_running;
int pl_tracing;
unsigned pl_gen;
int pl_seen_cyg;
int pl_pid;

__thread struct pl_tls pl_tls_data PL_TLS;
__thread struct pl_native_tls pl_ntls PL_TLS;

struct pl_tls *pl_tls(void)
{
	return &pl_tls_data;
}

void pl_thread_name(char *buf, size_t len)
{
	char comm[17] = {0};
	if (prctl(PR_GET_NAME, comm, 0, 0, 0) != 0)
		strcpy(comm, "?");
	strncpy(buf, comm, len - 1);
	buf[len - 1] = 0;
}

/* Registration allocates, so it happens once per thread, outside the event path's
 * common case. The thread is the one coprof_thread_self() gives for the default
 * profiler (ours), so coprof_task_switch calls made by the program and our hooks feed
 * the same stacks; the engine closes it when the thread exits. A thread that has
 * exited never registers again. */
struct coprof_thread *pl_thread(void)
{
	struct pl_tls *t = &pl_tls_data;
	if (pl_likely(t->thread != NULL))
		return t->thread;
	if (!pl_prof || pl_ntls.dead)
		return NULL;
	struct coprof_thread *th = NULL;
	if (coprof_default() == pl_prof) {
		th = coprof_thread_self();
	} else {
		char name[32];
		pl_thread_name(name, sizeof(name));
		if (coprof_thread_register(pl_prof, name, &th) != 0)
			th = NULL;
	}
	t->thread = th;
	return th;
}

/* One line on stderr in a single write. The buffer holds a whole path (PATH_MAX) and
 * the OS's reason after it; a line longer still ends in "..." rather than losing its
 * end silently. */
void pl_say(const char *fmt, ...)
{
	char buf[PATH_MAX + 512];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "coprof: ");
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(buf) - 2) {
		n = (int)sizeof(buf) - 2;
		memcpy(buf + n - 3, "...", 3);
	}
	buf[n++] = '\n';
	ssize_t w = write(2, buf, (size_t)n);
	(void)w;
}

#define RESOLVE(name) pl_real.name = (__typeof__(pl_real.name))dlsym(RTLD_NEXT, #name)

/* Resolved once, before the program runs: later calls only read the pointers. A hook
 * called before the constructor (another library's constructor) resolves them too. */
void pl_resolve_reals(void)
{
	RESOLVE(pthread_create);
	RESOLVE(pthread_setname_np);
	RESOLVE(makecontext);
	RESOLVE(swapcontext);
	RESOLVE(setcontext);
	RESOLVE(sigaction);
	RESOLVE(signal);
	RESOLVE(sigprocmask);
	RESOLVE(pthread_sigmask);
	pl_real.exit_ = (__typeof__(pl_real.exit_))dlsym(RTLD_NEXT, "_exit");
}

int pl_shim_dir(char *dir, size_t len)
{
	Dl_info info;
	if (!dladdr((void *)&pl_shim_dir, &info) || !info.dli_fname)
		return -1;
	snprintf(dir, len, "%s", info.dli_fname);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(dir, len, ".");
	return 0;
}
