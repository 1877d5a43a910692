/* attach.c: the shim loaded into a running process by `coprof attach`
 * (viewer/cmd-attach.c). coprof's trampoline dlopens the shim on one of the program's
 * threads, every signal blocked, and calls coprof_attach_entry with the options as
 * "NAME=VALUE" lines, read by the same parser as the environment (config.c). The
 * constructor did nothing (no LD_PRELOAD names us): the entry sets up what it would
 * have, with no toggle signal, and opens a window at once, from a thread of its own (a
 * Python's takes the GIL for the adapter, as api.c's late setup has it; the calling
 * thread may hold it). In sample mode each of the program's threads then registers
 * with the sampler in coprof_attach_thread. The interposers a preloaded shim would
 * have had bound (`bound` below) are bound into the program's objects (bind.c): threads
 * started from then on register as they start, exec and _exit write the window, the
 * coroutine switches of ucontext and Boost.Context are seen from the next one, handlers
 * installed from then on are known (and the sampler's tick signal is guarded), and an
 * instrumented program's -finstrument-functions hooks are ours (trace mode). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lifecycle.h"
#include "runtime/runtime.h"

#define ATTACH_OPTS_MAX 8192

/* The output path template in use, for `coprof detach` and `coprof attach` to say
 * which file was written: they read it through /proc/PID/mem. */
PL_EXPORT char coprof_attach_out[PATH_MAX];

/* Set by `coprof attach` (through /proc/PID/mem) when it gave up waiting for the
 * window to open: a set-up still under way (a Python whose GIL was not let go) then
 * leaves the window shut, rather than profile a process nobody waits for. */
PL_EXPORT int coprof_attach_cancel;

/* Threads coprof_attach_thread made sampled (their tick source armed): `coprof attach`
 * says how many of the program's threads are sampled from it. */
PL_EXPORT unsigned coprof_attach_sampled;

/* Why the set-up gave up, for `coprof attach` to say at once (it reads it through
 * /proc/PID/mem); empty while it has not. */
PL_EXPORT char coprof_attach_failed[256];

/* Calls of the entries that returned: `coprof attach` waits for the count before it
 * takes the trampoline out of the process (it reads it through /proc/PID/mem). */
PL_EXPORT unsigned coprof_attach_calls;

/* The options, NUL-separated NAME=VALUE, an empty string after the last. */
static char opts[ATTACH_OPTS_MAX];

static const char *opt_get(const char *name)
{
	size_t n = strlen(name);
	/* No toggle signal: requests come through the control pipe (/proc/PID/fd), and
	 * the program's signal dispositions stay as they were (nor does the shim say on
	 * its stderr that the program handles SIGUSR2 itself). The entry opens the
	 * window; COPROF_START's 0 is for a preloaded process waiting for a signal. */
	if (strcmp(name, "COPROF_SIGNAL") == 0)
		return "none";
	if (strcmp(name, "COPROF_START") == 0)
		return "1";
	for (const char *p = opts; *p; p += strlen(p) + 1)
		if (!strncmp(p, name, n) && p[n] == '=')
			return p + n + 1;
	return NULL;
}

static int copy_opts(const char *s)
{
	size_t n = strlen(s);
	if (n + 2 > sizeof(opts))
		return -E2BIG;
	memcpy(opts, s, n + 1);
	opts[n + 1] = 0;
	for (size_t i = 0; i < n; i++)
		if (opts[i] == '\n')
			opts[i] = 0;
	return 0;
}

/* Says why the set-up gives up, on the program's stderr (as the preload says its
 * problems) and in coprof_attach_failed for `coprof attach`. */
__attribute__((format(printf, 1, 2))) static void give_up(const char *fmt, ...)
{
	char why[sizeof(coprof_attach_failed)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pl_say("attach: %s; not profiling", why);
	memcpy(coprof_attach_failed, why, sizeof(why));
}

/* The interposers bound into the program's objects, those a preloaded shim has that
 * are right from a running program's middle: thread starts and names, exec and _exit
 * (each writes the window first; exec hands nothing over: the new image has no shim),
 * vfork (its child's hooks touch nothing of the parent's); the coroutine switches of
 * ucontext and Boost.Context (a coroutine made from then on is followed as under the
 * preload; one made before is no coroutine of theirs, and is found by its stack at
 * ticks, adapter-stack.c); the functions that install handlers (the handlers installed
 * before were noted at the set-up, pl_sig_note_handlers: a switch inside one makes no
 * context, which allocates); and the hooks of -finstrument-functions (trace mode). Not
 * the mask functions, sigset, nor the credential functions: their wrappers keep state
 * from the process's start (which signals the program believes it blocked, the
 * credentials coprof-keeper was told). */
static struct pl_bind_name bound[] = {
    {.name = "pthread_create"}, {.name = "pthread_setname_np"},
    {.name = "_exit"}, {.name = "_Exit"},
    {.name = "execve"}, {.name = "execv"}, {.name = "execvpe"}, {.name = "execvp"},
    {.name = "fexecve"}, {.name = "execveat"}, {.name = "execl"}, {.name = "execlp"},
    {.name = "execle"}, {.name = "vfork"}, {.name = "__vfork"},
    {.name = "makecontext"}, {.name = "swapcontext"}, {.name = "setcontext"},
    {.name = "make_fcontext"}, {.name = "jump_fcontext"}, {.name = "ontop_fcontext"},
    {.name = "sigaction"}, {.name = "signal"}, {.name = "bsd_signal"}, {.name = "sysv_signal"},
    /* last: not in sample mode (bind_interposers) */
    {.name = "__cyg_profile_func_enter"}, {.name = "__cyg_profile_func_exit"},
};
#define N_BOUND (sizeof(bound) / sizeof(bound[0]))

/* Entries pl_bind pointed at the shim's function `name`. */
static unsigned bound_count(const char *name)
{
	for (size_t i = 0; i < N_BOUND; i++)
		if (!strcmp(bound[i].name, name))
			return bound[i].bound;
	return 0;
}

/* How many of `bound` are bound (0: none yet), and the loader's count of objects added
 * when they last were (pl_bind_new). */
static size_t bound_n;
static unsigned long long bound_adds;

/* Binds the interposers; says when some entry could not be written (the others are
 * bound all the same). The -finstrument-functions hooks only in trace mode: in sample
 * mode they would follow an instrumented program's switches by the stack pointer,
 * where an attached shim finds coroutines by their stacks at ticks (adapter-stack.c). */
static void bind_interposers(void)
{
	size_t n = N_BOUND;
	if (pl_cfg.mode == COPROF_MODE_SAMPLE)
		n -= 2; /* the hooks, last */
	/* tests: a thread the program starts in the gap is given the entry by coprof
	 * attach once the window is open */
	pl_test_pause("COPROF_TEST_ATTACH_DELAY_MS");
	int rc = pl_bind_new(bound, n, &bound_adds);
	__atomic_store_n(&bound_n, n, __ATOMIC_RELEASE);
	if (rc != 0)
		pl_say("attach: some of the program's calls of the C library stay unseen: %s",
		       strerror(-rc));
}

/* The control thread, while a window is open (pl_control_init_attached). */
static void rebind(void)
{
	static int said;
	size_t n = __atomic_load_n(&bound_n, __ATOMIC_ACQUIRE);
	if (n && pl_bind_new(bound, n, &bound_adds) != 0 && !said++)
		pl_say("attach: some of the program's calls of the C library stay unseen in an "
		       "object it loaded later");
}

static const struct pl_lend lend = {
    .threads_pause = pl_control_fork_pause,
    .threads_resume = pl_control_fork_resume,
    .late = 1,
};

/* What the constructor does in a preloaded process, with the options for an
 * environment, less exec's hand-over and coprof-keeper (a process that changes its
 * credentials later is not followed), and less the runtimes, which the caller adds.
 * Runs on a thread of the shim's own, without the GIL: nothing here needs it. 0, or
 * -errno (said). */
static int setup(void)
{
	char err[256];
	struct pl_tls *t = &pl_tls_data;
	pl_resolve_reals();
	pl_pid = getpid();
	t->guard = 1;
	int rc = pl_config_parse(&pl_cfg, opt_get, err, sizeof(err));
	struct coprof_options opt = pl_config_options(&pl_cfg);
	if (rc == 0 && (rc = coprof_create(&opt, &pl_prof)) != 0)
		snprintf(err, sizeof(err), "cannot create the profiler: %s", coprof_strerror(rc));
	if (rc != 0) {
		give_up("%s", err);
		pl_prof = NULL;
		t->guard = 0;
		return rc < 0 ? rc : -EINVAL;
	}
	snprintf(coprof_attach_out, sizeof(coprof_attach_out), "%s", pl_cfg.out);
	coprof_set_default(pl_prof);
	if (pl_symbols_new(&pl_syms) == 0)
		coprof_add_resolver(pl_prof, pl_symbols_resolve, pl_syms);
	/* The engine calibrates its clock, once per process, at the first thread's
	 * registration, with sleeps: here, not in a thread of the program's (see
	 * coprof_attach_entry), and in a profiler of its own, so that this thread is
	 * not in the files. */
	struct coprof *scratch;
	struct coprof_thread *warm;
	if (coprof_create(&opt, &scratch) == 0) {
		if (coprof_thread_register(scratch, "coprof-attach", &warm) == 0)
			coprof_thread_exit(warm);
		coprof_destroy(scratch);
	}
	/* Not pl_threads_init: its count of the program's threads is kept by the
	 * pthread_create hook, which an attached shim is not (symbols are bound). */
	pl_control_init_attached(rebind);
	pl_fork_init();
	pl_sig_note_handlers();
	pl_active = 1;
	t->guard = 0;
	return 0;
}

/* The set-up thread of a native program. Sample mode: each thread arms its tick source
 * at once when it registers (coprof_attach_thread, or the bound pthread_create's start).
 * Trace mode: the program's -finstrument-functions hooks, once bound, are the
 * instrument runtime's; a program with none gives up. Then opens the window. */
static void *native_setup(void *arg)
{
	(void)arg;
	if (setup() != 0)
		return NULL;
	pl_tls_data.guard = 1;
	pl_uctx_init(1);
	pl_fctx_init(1);
	pl_stack_init();
	if (pl_cfg.mode == COPROF_MODE_SAMPLE)
		pl_sampler_init_attached();
	else
		pl_instrument_init();
	bind_interposers();
	pl_tls_data.guard = 0;
	if (pl_cfg.mode != COPROF_MODE_SAMPLE && !bound_count("__cyg_profile_func_enter")) {
		give_up("trace mode needs a program built with -finstrument-functions, and no "
			"object of this one calls its hooks; use --mode sample");
		return NULL;
	}
	pl_control_start();
	pl_control_republish(); /* the control thread's name says so */
	return NULL;
}

/* The Python setup thread: the set-up, then the GIL through the interpreter's own
 * functions (the shim references no Python symbol) for the adapter; the window opens
 * once the GIL is given back (the adapter takes it again to put its hook on, as a toggle does). */
static void *python_setup(void *arg)
{
	(void)arg;
	int (*initialized)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
	void (*release)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
	if (!initialized || !ensure || !release || !initialized()) {
		give_up("the Python interpreter is not running");
		return NULL;
	}
	if (setup() != 0)
		return NULL;
	/* The GIL only for the adapter: the program's Python code waits meanwhile. */
	int g = ensure();
	pl_tls_data.guard = 1;
	pl_uctx_init(1);
	pl_fctx_init(1);
	pl_stack_init();
	pl_python_init(&lend);
	pl_tls_data.guard = 0;
	release(g);
	if (__atomic_load_n(&coprof_attach_cancel, __ATOMIC_ACQUIRE))
		return NULL;
	/* Sample mode: the tick handler reads the frames through the adapter; each thread
	 * registers with the sampler when coprof's trampoline calls coprof_attach_thread
	 * on it (this thread cannot wait for the first: it may hold the GIL). */
	pl_tls_data.guard = 1;
	if (pl_cfg.mode == COPROF_MODE_SAMPLE)
		pl_sampler_init_attached();
	bind_interposers();
	pl_tls_data.guard = 0;
	if (!pl_runtime_on("python")) {
		give_up("the CPython adapter could not attach (said above)");
		return NULL;
	}
	pl_control_start();
	pl_control_republish(); /* the control thread's name says so */
	return NULL;
}

static int returned(int rc)
{
	__atomic_add_fetch(&coprof_attach_calls, 1, __ATOMIC_RELEASE);
	return rc;
}

/* Called once by coprof's trampoline, signals blocked, on a thread that holds no lock
 * of the C library or the loader (but may hold Python's GIL). Returns at once, the
 * set-up going on in a thread of the shim's own: nothing that sleeps may run on this
 * thread (a nanosleep resets the kernel's restart of the one it was stopped in, which
 * the trampoline restarts afterwards: it would end early, with EINTR; the set-up
 * sleeps, in the clock's calibration), and the program's thread is held the shortest
 * time (the set-up took 55 ms here). In sample mode coprof then calls
 * coprof_attach_thread on every thread of the program's, this one too. 0, 1 when the
 * shim is set up already in this process (preloaded, or attached before), or -errno. */
PL_EXPORT int coprof_attach_entry(const char *options)
{
	if (pl_active || pl_prof)
		return returned(1);
	if (copy_opts(options) != 0)
		return returned(-E2BIG);
	int python = dlsym(RTLD_DEFAULT, "Py_IsInitialized") != NULL;
	pthread_t th;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pl_resolve_reals();
	int rc = pl_real.pthread_create(&th, &attr, python ? python_setup : native_setup, NULL);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		pthread_setname_np(th, "coprof-attach");
	return returned(-rc);
}

/* Called by the trampoline on each of the program's threads, once the entry's set-up
 * opened a window in sample mode: the thread registers with the sampler (nothing
 * sleeps on the way: the clock is calibrated already). 0, or 1 when there is nothing
 * to do. */
PL_EXPORT int coprof_attach_thread(const char *unused)
{
	(void)unused;
	if (!pl_active || pl_cfg.mode != COPROF_MODE_SAMPLE)
		return returned(1);
	if (pl_sampler_thread_here() != 0)
		return returned(1);
	__atomic_add_fetch(&coprof_attach_sampled, 1, __ATOMIC_RELEASE);
	return returned(0);
}
