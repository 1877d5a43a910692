/* python-loader.c: the shim's side of the CPython adapter. In the shim's constructor it
 * asks the dynamic linker whether this process is CPython (Py_GetVersion, found with
 * dlsym(RTLD_DEFAULT); the shim references no Python symbol), dlopens the adapter built
 * for that version (next to the shim: python/ in the build tree, coprof/ installed) and
 * registers it as the "python" runtime. Non-Python processes return after one dlsym.
 * In sample mode the adapter keeps os.fork quiet (python/fork.c) and lends the tick
 * handler its frame reader (python/sampling/). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "python/adapter.h"
#include "runtime.h"

static struct pl_py_host host;
static struct pl_py_adapter adapter;

/* For greenlet switches in sample mode (python/greenlet/): the sampler charges the
 * ticks that follow to `to`. in_switch keeps a tick that lands meanwhile off the ring. */
static void py_ctx_switch(struct coprof_ctx *from, struct coprof_ctx *to)
{
	struct coprof_thread *th = pl_thread();
	if (!th)
		return;
	struct pl_tls *t = pl_tls();
	t->in_switch = 1;
	pl_sampler_switch(from, to);
	coprof_ctx_switch(th, to);
	t->in_switch = 0;
}

static void py_ctx_finish(struct coprof_ctx *c)
{
	struct coprof_thread *th = pl_thread();
	if (!th)
		return;
	pl_sampler_finish(c);
	coprof_ctx_finish(th, c);
}

static int rt_start(void)
{
	return adapter.start ? adapter.start() : 0;
}

static int rt_stop(void)
{
	return adapter.stop ? adapter.stop() : 0;
}

static void rt_after_fork_child(void)
{
	if (adapter.after_fork_child)
		adapter.after_fork_child();
}

static const struct pl_runtime python_runtime = {
    .name = "python",
    .start = rt_start,
    .stop = rt_stop,
    .after_fork_child = rt_after_fork_child,
};

/* "3.11.2 (main, ...)" -> 3, 11. 0 or -EINVAL. */
static int parse_version(const char *v, int *major, int *minor)
{
	char *end;
	long ma = strtol(v, &end, 10);
	if (*end != '.')
		return -EINVAL;
	long mi = strtol(end + 1, &end, 10);
	if (end == v || ma < 0 || mi < 0 || ma > 99 || mi > 999)
		return -EINVAL;
	*major = (int)ma;
	*minor = (int)mi;
	return 0;
}

/* Looks for coprof-pythonX.Y.so in the folders an adapter may be in, relative to the
 * shim's own file: python/ (the build tree) and coprof/ (installed in libdir). Says
 * why it found none only when `loud`. */
static void *open_adapter(int major, int minor, char *path, size_t len, int loud)
{
	char dir[PATH_MAX];
	if (pl_shim_dir(dir, sizeof(dir)) < 0)
		return NULL;
	static const char *const subdirs[] = {"python", "coprof"};
	for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
		int n = snprintf(path, len, "%s/%s/coprof-python%d.%d.so", dir, subdirs[i], major,
				 minor);
		if (n < 0 || (size_t)n >= len || access(path, R_OK) != 0)
			continue;
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (h || !loud)
			return h;
		pl_say("cannot load %s: %s; Python is not profiled", path, dlerror());
		return NULL;
	}
	if (loud)
		pl_say("no adapter for Python %d.%d in %s; Python is not profiled", major, minor,
		       dir);
	return NULL;
}

/* A struct of what the adapter may use, and its callbacks into pl_runtime_add. In
 * sample mode no Python hook is installed (the tick handler reads frames) and the
 * adapter pauses the shim's threads around os.fork and names the sampled frames. */
void pl_python_init(const struct pl_lend *lend)
{
	if (!pl_prof)
		return;
	int profile = pl_cfg.mode == COPROF_MODE_TRACE;
	const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
	if (!version || !dlsym(RTLD_DEFAULT, "PySys_AddAuditHook"))
		return;
	int major, minor;
	if (parse_version(version(), &major, &minor) != 0)
		return;
	if (major != 3 || minor < 10) {
		if (profile)
			pl_say("Python %d.%d is not supported (3.10 and later are); it is "
			       "not profiled",
			       major, minor);
		return;
	}
	char path[PATH_MAX];
	void *h = open_adapter(major, minor, path, sizeof(path), profile);
	if (!h)
		return;
	pl_py_attach_fn attach = (pl_py_attach_fn)dlsym(h, PL_PY_ENTRY);
	host = (struct pl_py_host){
	    .abi = PL_PY_ABI,
	    .prof = &pl_prof,
	    .clock = pl_cfg.clock,
	    .builtins = pl_cfg.builtins,
	    .profile = profile,
	    .fork_pause = lend->threads_pause,
	    .fork_resume = lend->threads_resume,
	    .thread = pl_thread,
	    .say = pl_say,
	    .hook = (enum pl_py_hook)pl_cfg.py_hook,
	    .ctx_switch = py_ctx_switch,
	    .ctx_finish = py_ctx_finish,
	    .task_wait = pl_sampler_wait_record,
	    .thread_of = pl_sampler_thread_of,
	    .late = lend->late,
	    .test_pause = pl_test_pause,
	};
	int rc = attach ? attach(&host, &adapter) : -ENOENT;
	if (rc != 0) {
		/* -EPROTO: built against another libcoprof.so, which it said */
		if (rc == -EPROTO)
			pl_runtime_refused();
		else if (profile)
			pl_say("the Python adapter %s failed (%d); Python is not profiled", path,
			       rc);
		return;
	}
	if (profile || adapter.sample)
		pl_runtime_add(&python_runtime);
	pl_sampler_python = adapter.sample;
	pl_sampler_python_fold = adapter.fold;
	pl_sampler_python_after_fold = adapter.after_fold;
	pl_sampler_python_claim = adapter.claim;
}
