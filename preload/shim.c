/* shim.c: libcoprof-preload.so's constructor and destructor, and the state the parts
 * share (shim.h, internal.h). The constructor reads the environment (config.c), makes
 * the process's profiler, installs the toggle signal and the control thread, lets the
 * runtime adapters start, and starts profiling unless COPROF_START=0. The destructor
 * dumps at normal exit. Both run on the program's main thread. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "creds.h"
#include "internal.h"
#include "symbols.h"

struct pl_config pl_cfg;
struct coprof *pl_prof;
struct pl_symbols *pl_syms;
struct pl_reals pl_real;
int pl_active;
int pl_running;
int pl_tracing;
unsigned pl_gen;
int pl_seen_cyg;

__thread struct pl_tls pl_tls_data PL_TLS;
__thread struct pl_native_tls pl_ntls PL_TLS;

struct pl_tls *pl_tls(void)
{
	return &pl_tls_data;
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

static const char *env_get(const char *name)
{
	return getenv(name);
}

static void fork_prepare(void)
{
	pl_creds_fork_prepare();
	pl_control_fork_prepare();
	if (pl_syms)
		pl_symbols_lock(pl_syms);
}

static void fork_parent(void)
{
	if (pl_syms)
		pl_symbols_unlock(pl_syms);
	pl_control_fork_parent();
}

static void fork_child(void)
{
	if (pl_syms)
		pl_symbols_unlock(pl_syms);
	pl_sig_after_fork_child();
	pl_creds_fork_child();
	pl_tls_data.thread = NULL;
	pl_pid = getpid();
	pl_control_fork_child();
}

__attribute__((constructor)) static void pl_init(void)
{
	char err[256];
	struct pl_tls *t = &pl_tls_data;
	pl_resolve_reals();
	pl_pid = getpid();
	t->guard = 1;
	pl_exec_init();
	if (pl_config_parse(&pl_cfg, env_get, err, sizeof(err)) != 0) {
		pl_say("%s", err);
		t->guard = 0;
		return;
	}
	struct coprof_options opt = {
	    .clock = pl_cfg.clock,
	    .mode = pl_cfg.mode,
	    .hz = pl_cfg.mode == COPROF_MODE_SAMPLE ? pl_cfg.hz : 0,
	};
	int rc = coprof_create(&opt, &pl_prof);
	if (rc != 0) {
		pl_say("cannot create the profiler: %s; profiling is off", coprof_strerror(rc));
		pl_prof = NULL;
		t->guard = 0;
		return;
	}
	coprof_set_default(pl_prof);
	if (pl_symbols_new(&pl_syms) == 0)
		coprof_add_resolver(pl_prof, pl_symbols_resolve, pl_syms);
	pl_uctx_init();
	pl_threads_init();
	pl_creds_init();
	pl_control_exec_keep();
	pl_thread();
	pl_signals_install(pl_cfg.signo);
	pl_control_init();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	pl_active = 1;
	pl_python_init();
	pl_sampler_init();
	if (pl_cfg.start)
		pl_control_start();
	t->guard = 0;
}

/* Runs after the program's atexit handlers and its own destructors (it was loaded
 * before the program), before libcoprof's. */
__attribute__((destructor)) static void pl_fini(void)
{
	/* Not in a child the shim did not see made (vfork, or clone() without fork's
	 * handlers): the state is the parent's, its control thread is not here. */
	if (!pl_active || pl_tls_data.vfork_child || getpid() != pl_pid)
		return;
	pl_tls_data.guard = 1;
	pl_control_exit();
}

/* The folder of the shim's own file (the build tree's preload/, or the installed
 * libdir), where its helpers lie: "." when the loader gives no folder. 0, or -1 when
 * the loader does not know the file. */
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
