/* exec.c: the exec family, interposed so that exec does not drop the profile before
 * it. The window so far is stopped and written, as a toggle's stop writes it, and the
 * new image (profiling itself if LD_PRELOAD survives) goes on numbering this pid's
 * files after it, told through COPROF_EXEC_STATE in its environment, which its shim
 * takes out again at start. Runs on whichever thread execs; in a vfork child, in a
 * thread the shim itself runs, or before the shim is up it only passes the call on. If
 * exec fails, the file written for it is removed, the window goes on as if no exec had
 * been tried, and errno is the exec's. The keeper (creds.c), if any, stays: its socket
 * closes on exec, and it answers the dumps after a failed one. glibc's exec functions call
 * its own execve inside, not ours, so each is wrapped here. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lifecycle.h"

extern char **environ;

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

static execve_fn real_execve;
static execvpe_fn real_execvpe;
static fexecve_fn real_fexecve;
static execveat_fn real_execveat;

/* Resolved before the program runs, so that a vfork child never calls dlsym. */
__attribute__((constructor)) static void resolve(void)
{
	real_execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
	real_execvpe = (execvpe_fn)dlsym(RTLD_NEXT, "execvpe");
	real_fexecve = (fexecve_fn)dlsym(RTLD_NEXT, "fexecve");
	real_execveat = (execveat_fn)dlsym(RTLD_NEXT, "execveat");
}

void pl_exec_init(void)
{
	const char *v = getenv(PL_EXEC_ENV);
	if (!v)
		return;
	pl_control_adopt_exec(v);
	unsetenv(PL_EXEC_ENV); /* the program never sees it */
}

/* Whether this exec may dump: in the process the shim's state belongs to (not a vfork
 * child), from a thread of the program, not from the shim's own code. */
static int may_dump(void)
{
	return pl_active && !pl_tls_data.guard && !pl_ntls.dead && getpid() == pl_pid;
}

static size_t count(char *const v[])
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

/* Copies `env` into `out` (room for count(env) + 2) without any PL_EXEC_ENV entry,
 * adding `var` ("NAME=state") unless it is NULL. */
static char *const *with_state(char *const env[], char **out, char *var)
{
	size_t k = 0, len = strlen(PL_EXEC_ENV);
	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], PL_EXEC_ENV, len) || env[i][len] != '=')
			out[k++] = env[i];
	if (var)
		out[k++] = var;
	out[k] = NULL;
	return out;
}

/* The calls below share one shape: when the exec may dump, dump and build the new
 * environment, call the real function with it, and resume if it returned (failed). */
#define STATE_VAR_MAX 96
#define EXEC_WITH_STATE(env, call)                                                                 \
	do {                                                                                       \
		if (!may_dump())                                                                   \
			break;                                                                     \
		char var_[STATE_VAR_MAX] = PL_EXEC_ENV "=";                                        \
		size_t off_ = strlen(var_);                                                        \
		pl_tls_data.guard = 1; /* nothing the shim does here is the program's */           \
		int was_ = pl_control_exec_prepare(var_ + off_, sizeof(var_) - off_);              \
		char *new_env_[count(env) + 2];                                                    \
		char *const *envp_ = with_state((env), new_env_, var_[off_] ? var_ : NULL);        \
		int rc_ = (call);                                                                  \
		int errno_ = errno;                                                                \
		pl_control_exec_failed(was_);                                                      \
		pl_tls_data.guard = 0;                                                             \
		errno = errno_;                                                                    \
		return rc_;                                                                        \
	} while (0)

static int no_real(void)
{
	errno = ENOSYS;
	return -1;
}

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	if (!real_execve)
		resolve();
	if (!real_execve)
		return no_real();
	EXEC_WITH_STATE(envp, real_execve(path, argv, envp_));
	return real_execve(path, argv, envp);
}

PL_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

PL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (!real_execvpe)
		resolve();
	if (!real_execvpe)
		return no_real();
	EXEC_WITH_STATE(envp, real_execvpe(file, argv, envp_));
	return real_execvpe(file, argv, envp);
}

PL_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

PL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	if (!real_fexecve)
		resolve();
	if (!real_fexecve)
		return no_real();
	EXEC_WITH_STATE(envp, real_fexecve(fd, argv, envp_));
	return real_fexecve(fd, argv, envp);
}

PL_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		       int flags)
{
	if (!real_execveat)
		resolve();
	if (!real_execveat)
		return no_real();
	EXEC_WITH_STATE(envp, real_execveat(dirfd, path, argv, envp_, flags));
	return real_execveat(dirfd, path, argv, envp, flags);
}

/* The list forms: the arguments up to the NULL become an array on the stack (as glibc
 * builds it), and execle's environment is the pointer after that NULL. */
#define COLLECT_ARGS(arg0, ap, argv)                                                               \
	size_t n_ = 1;                                                                             \
	va_start(ap, arg0);                                                                        \
	while (va_arg(ap, char *))                                                                 \
		n_++;                                                                              \
	va_end(ap);                                                                                \
	char *argv[n_ + 1];                                                                        \
	argv[0] = (char *)(arg0);                                                                  \
	va_start(ap, arg0);                                                                        \
	for (size_t i_ = 1; i_ <= n_; i_++)                                                        \
		argv[i_] = va_arg(ap, char *);

PL_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	COLLECT_ARGS(arg, ap, argv)
	va_end(ap);
	return execve(path, argv, environ);
}

PL_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	COLLECT_ARGS(arg, ap, argv)
	va_end(ap);
	return execvpe(file, argv, environ);
}

PL_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	COLLECT_ARGS(arg, ap, argv)
	char *const *envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}
