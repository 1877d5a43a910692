/* constructor.c: libcoprof-preload.so's constructor and destructor. The constructor
 * reads the environment (config.c), makes the process's profiler, installs the toggle
 * signal and the control thread, lets the runtimes set up, and starts profiling unless
 * COPROF_START=0. The destructor dumps at normal exit. Both run on the program's main
 * thread. Loaded by dlopen rather than preloaded (`import coprof`: lifecycle/api.c),
 * the constructor does nothing: the API sets up at its first start. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lifecycle.h"
#include "runtime/runtime.h"

static const char *env_get(const char *name)
{
	return getenv(name);
}

/* This file is one that LD_PRELOAD names: by its path (the same file, however named),
 * or by a bare name, searched as the dynamic linker searches it, that is our file name.
 * Otherwise the shim was dlopen'ed (the Python API) and the process is not preloaded. */
static int preloaded(void)
{
	const char *env = getenv("LD_PRELOAD");
	Dl_info info;
	if (!env || !dladdr((void *)&preloaded, &info) || !info.dli_fname)
		return 0;
	char self[PATH_MAX], real[PATH_MAX], one[PATH_MAX];
	if (!realpath(info.dli_fname, self))
		return 0;
	const char *base = strrchr(self, '/') ? strrchr(self, '/') + 1 : self;
	while (*env) {
		size_t n = strcspn(env, ": ");
		if (n > 0 && n < sizeof(one)) {
			memcpy(one, env, n);
			one[n] = 0;
			if (strchr(one, '/') ? realpath(one, real) && strcmp(real, self) == 0
					     : strcmp(one, base) == 0)
				return 1;
		}
		env += n;
		env += strspn(env, ": ");
	}
	return 0;
}

__attribute__((constructor)) static void pl_init(void)
{
	char err[256];
	struct pl_tls *t = &pl_tls_data;
	if (!preloaded())
		return;
	pl_resolve_reals();
	pl_pid = getpid();
	t->guard = 1;
	pl_exec_init();
	if (pl_config_parse(&pl_cfg, env_get, err, sizeof(err)) != 0) {
		pl_say("%s", err);
		t->guard = 0;
		return;
	}
	struct coprof_options opt = pl_config_options(&pl_cfg);
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
	pl_threads_init();
	pl_creds_init();
	pl_control_exec_keep();
	pl_thread();
	pl_toggle_install(pl_cfg.signo);
	pl_control_init();
	pl_fork_init();
	pl_active = 1;
	static const struct pl_lend lend = {
	    .threads_pause = pl_control_fork_pause,
	    .threads_resume = pl_control_fork_resume,
	};
	pl_adapters_init(&lend);
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
