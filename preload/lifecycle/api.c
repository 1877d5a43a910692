/* api.c: the doors of the Python API (`import coprof`, package/_coprof.c), the only
 * names the shim exports besides its hooks. In a preloaded process they drive the
 * profiler the constructor made, under control.c's lock, as toggles do; in a process
 * that only dlopen'ed the shim (whose constructor then did nothing), the first setup
 * makes the profiler and attaches the CPython adapter, with no hook interposed, no
 * signal and no control thread. coprof_api_setup runs with the GIL held; the others
 * without it (the adapter takes it to put its hook on and off). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lifecycle.h"
#include "runtime/runtime.h"

#define API_SETUP 1u   /* coprof_api_state: the profiler exists */
#define API_PRELOAD 2u /* the process is preloaded (the constructor made it) */
#define API_RUNNING 4u /* a window is open */
#define API_WALL 8u    /* its clock is wall (else cpu) */
#define API_SAMPLE 16u /* sample mode (only when preloaded so) */

static const char *api_clock = "cpu";
static const char *api_builtins = "0";

/* The environment as the API-only process sees it: the API chooses the clock and
 * builtins; trace mode, no toggle signal, no windows of its own. The rest
 * (COPROF_PY_HOOK, COPROF_NATIVE...) as the environment says. */
static const char *api_env(const char *name)
{
	if (strcmp(name, "COPROF_CLOCK") == 0)
		return api_clock;
	if (strcmp(name, "COPROF_BUILTINS") == 0)
		return api_builtins;
	if (strcmp(name, "COPROF_MODE") == 0)
		return "trace";
	if (strcmp(name, "COPROF_SIGNAL") == 0)
		return "none";
	if (strcmp(name, "COPROF_START") == 0)
		return "1";
	if (strcmp(name, "COPROF_INTERVAL") == 0 || strcmp(name, "COPROF_KEEP") == 0)
		return NULL;
	return getenv(name);
}

/* What the constructor does for a preloaded process, less what a program that only
 * imported us must not get: the toggle signal, the control thread, the keeper, the
 * native adapters. Called with the GIL held. */
static int setup_late(char *err, size_t errlen)
{
	struct pl_tls *t = &pl_tls_data;
	pl_resolve_reals();
	pl_pid = getpid();
	t->guard = 1;
	int rc = pl_config_parse(&pl_cfg, api_env, err, errlen);
	struct coprof_options opt = pl_config_options(&pl_cfg); /* COPROF_MODE is trace here */
	if (rc == 0 && (rc = coprof_create(&opt, &pl_prof)) != 0)
		snprintf(err, errlen, "cannot create the profiler: %s", coprof_strerror(rc));
	if (rc != 0) {
		pl_prof = NULL;
		t->guard = 0;
		return rc < 0 ? rc : -EINVAL;
	}
	coprof_set_default(pl_prof);
	if (pl_symbols_new(&pl_syms) == 0)
		coprof_add_resolver(pl_prof, pl_symbols_resolve, pl_syms);
	pl_thread();
	pl_fork_init();
	static const struct pl_lend lend = {
	    .threads_pause = pl_control_fork_pause,
	    .threads_resume = pl_control_fork_resume,
	    .late = 1,
	};
	pl_python_init(&lend);
	t->guard = 0;
	if (!pl_runtime_on("python")) {
		snprintf(err, errlen, "the CPython adapter could not attach (said above)");
		return -ENOENT;
	}
	return 0;
}

/* 1 when the process is profiled by this file under LD_PRELOAD, else 0. */
PL_EXPORT int coprof_api_preloaded(void)
{
	return pl_active;
}

/* Makes sure a profiler exists with clock `wall` (1) or cpu (0) and C builtins keyed
 * or not. Preloaded, the profiler is the preload's: 0 when its clock is the one asked,
 * else -EINVAL (its clock is in coprof_api_state). Not preloaded, the first call makes
 * it; later calls give -EINVAL when they ask another clock: a profiler's clock is
 * chosen once. 0 or -errno, with a sentence in `err`. GIL held. */
PL_EXPORT int coprof_api_setup(int wall, int builtins, char *err, size_t errlen)
{
	err[0] = 0;
	if (pl_active || pl_prof) {
		if ((pl_cfg.clock == COPROF_CLOCK_WALL) != (wall != 0)) {
			snprintf(err, errlen, "the profiler's clock is %s (%s)",
				 pl_cfg.clock == COPROF_CLOCK_WALL ? "wall" : "cpu",
				 pl_active ? "COPROF_CLOCK of the preload"
					   : "chosen at the first start");
			return -EINVAL;
		}
		return pl_prof ? 0 : -ENODEV;
	}
	api_clock = wall ? "wall" : "cpu";
	api_builtins = builtins ? "1" : "0";
	return setup_late(err, errlen);
}

PL_EXPORT unsigned coprof_api_state(void)
{
	unsigned s = 0;
	if (pl_prof)
		s |= API_SETUP;
	if (pl_active)
		s |= API_PRELOAD;
	if (__atomic_load_n(&pl_running, __ATOMIC_ACQUIRE))
		s |= API_RUNNING;
	if (pl_cfg.clock == COPROF_CLOCK_WALL)
		s |= API_WALL;
	if (pl_cfg.mode == COPROF_MODE_SAMPLE)
		s |= API_SAMPLE;
	return s;
}

/* The GIL released, each. */
PL_EXPORT int coprof_api_start(void)
{
	return pl_prof ? pl_control_api_start() : -ENODEV;
}

PL_EXPORT int coprof_api_stop(const char *snap, int *dumped)
{
	return pl_prof ? pl_control_api_stop(snap, dumped) : 1;
}

PL_EXPORT int coprof_api_dump(const char *path)
{
	return pl_control_api_dump(path);
}

PL_EXPORT int coprof_api_clear(void)
{
	return pl_control_api_clear();
}

PL_EXPORT const char *coprof_api_strerror(int rc)
{
	return coprof_strerror(rc);
}
