/* creds.c: processes that change their credentials after coprof set up (an nginx or
 * php-fpm worker switching to `nobody`). The set*id, setgroups, initgroups and capset
 * calls are interposed; they run in the program's thread that makes the change.
 *
 * Two things happen around each such call. First, when the threads' capabilities
 * differ, the shim's own threads (the control thread, the sampler's folding thread)
 * stop for its length and start again after it, from the calling thread, whose
 * per-thread credentials they inherit: glibc makes every thread run the same set*id
 * call and aborts the process if their results differ, and capset and the effect of
 * prctl(PR_SET_KEEPCAPS) apply to one thread only (setpriv sets both, then calls
 * setresuid and setresgid). Second, if the profile's directory is writable before
 * the call, coprof-keeper (keeper/keeper.c) is started with those rights; if it is no
 * longer writable after the call, the keeper stays and publishes this process's files
 * (a route of publish.c's, in place while a keeper lives); otherwise it is let go. A
 * process that regains the rights keeps its keeper; its dumps then go the usual way
 * while the directory is writable. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper/keeper.h"
#include "lifecycle.h"

#define PL_KEEPER_WAIT_MS 5000 /* for the keeper's "ready" */

/* keeper_lock guards everything below; taken by the interposers and by dumps (which
 * hold control.c's lock first). */
static pthread_mutex_t keeper_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_fd keeper_fd = PL_FD_NONE; /* the shim's end of the socketpair */
static pid_t keeper_pid;		    /* 0: no keeper */
static char keeper_exe[PATH_MAX];	    /* coprof-keeper, next to the shim; "": none */
static int said_no_keeper;		    /* the reason it could not start was said */
/* A process this one was forked from (in this image) received orphans when it forked:
 * a keeper started here would end as its child (reaps_orphans). parent_reaps carries
 * the parent's answer from fork's prepare step into the child. */
static int ancestor_reaps, parent_reaps;
/* The stacks of the two processes that start a keeper (spawn_locked), used while the
 * caller waits, under keeper_lock. */
static char keeper_stack[32 * 1024] __attribute__((aligned(16)));
static char between_stack[16 * 1024] __attribute__((aligned(16)));

/* The keeper lives next to the shim: in the build tree, the same folder; installed,
 * LIBDIR/coprof/. */
void pl_creds_init(void)
{
	keeper_exe[0] = 0;
	char dir[PATH_MAX];
	if (pl_shim_dir(dir, sizeof(dir)) < 0)
		return;
	static const char *const subdirs[] = {"", "/coprof"};
	for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
		int n = snprintf(keeper_exe, sizeof(keeper_exe), "%s%s/" PL_KEEPER_NAME, dir,
				 subdirs[i]);
		if (n > 0 && (size_t)n < sizeof(keeper_exe) && access(keeper_exe, X_OK) == 0)
			return;
	}
	keeper_exe[0] = 0;
}

/* The directory every file of COPROF_OUT goes to, when it is one fixed folder (no %
 * in it): 0, or -EINVAL. */
static int out_dir(char dir[PATH_MAX])
{
	const char *t = pl_cfg.out;
	const char *slash = strrchr(t, '/');
	if (!slash)
		snprintf(dir, PATH_MAX, ".");
	else if (slash == t)
		snprintf(dir, PATH_MAX, "/");
	else
		snprintf(dir, PATH_MAX, "%.*s", (int)(slash - t), t);
	return strchr(dir, '%') ? -EINVAL : 0;
}

/* The process may make files in the profile's directory, as its effective ids stand. */
static int dir_writable(void)
{
	char dir[PATH_MAX];
	return out_dir(dir) == 0 && faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0;
}

struct spawn_arg {
	int sock;
	char *const *argv;
	pid_t keeper; /* set by the go-between: the keeper's pid, or -errno */
};

/* The keeper, sharing the caller's memory until execve (CLONE_VM | CLONE_VFORK):
 * only system calls. Every signal is blocked (the caller's mask). */
static int keeper_child(void *p)
{
	const struct spawn_arg *a = p;
	if (dup2(a->sock, PL_KEEPER_FD) != PL_KEEPER_FD)
		syscall(SYS_exit, 127);
	if (syscall(SYS_close_range, PL_KEEPER_FD + 1, ~0U, 0) != 0)
		for (int fd = PL_KEEPER_FD + 1; fd < 65536; fd++)
			close(fd);
	char *const envp[] = {NULL};
	execve(a->argv[0], a->argv, envp);
	syscall(SYS_exit, 127);
	return 127;
}

/* The go-between: makes the keeper and leaves once it has exec'd, so the keeper is
 * reparented (to init, or the nearest subreaper) and is never a child of the program:
 * an exec makes a process's exit signal SIGCHLD, so as the program's child the keeper
 * would wake its SIGCHLD handler, be reaped by its waitpid(-1), and keep a wait() for
 * all children waiting. The go-between itself never execs, so its exit signal stays 0
 * (none) and only creds.c reaps it, by pid with __WCLONE. System calls only. */
static int go_between(void *p)
{
	struct spawn_arg *a = p;
	pid_t k =
	    clone(keeper_child, keeper_stack + sizeof(keeper_stack), CLONE_VM | CLONE_VFORK, a);
	a->keeper = k < 0 ? -errno : k;
	syscall(SYS_exit, 0);
	return 0;
}

static void reap(pid_t pid)
{
	while (waitpid(pid, NULL, __WCLONE) < 0 && errno == EINTR)
		;
}

static const struct pl_publish_route route;

/* The keeper goes: its end sees the socket close and returns (its parent, not this
 * process, reaps it). Dumps take the usual way again. */
static void dismiss_locked(void)
{
	pl_publish_route(NULL);
	pl_fd_close(&keeper_fd);
	keeper_pid = 0;
}

static int await_reply(int fd, int timeout_ms, int *rc)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int ready;
	while ((ready = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (ready == 0)
		return -ETIMEDOUT;
	struct pl_keep_reply r;
	ssize_t n;
	while ((n = recv(fd, &r, sizeof(r), 0)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(r))
		return -EPIPE;
	*rc = r.rc;
	return 0;
}

/* Once per process: why no keeper runs (`err`, a -errno, as the OS says it; 0: none). */
static void say_no_keeper(const char *why, int err)
{
	if (said_no_keeper)
		return;
	said_no_keeper = 1;
	pl_say("cannot start %s (%s%s%s); a profile this process can no longer write after "
	       "changing its credentials is lost",
	       PL_KEEPER_NAME, why, err ? ": " : "", err ? strerror(-err) : "");
}

/* async-signal-safe: orphaned descendants of this process come to it: it is a child
 * subreaper (PR_SET_CHILD_SUBREAPER), or pid 1 of its pid namespace. */
static int reaps_orphans(void)
{
	int on = 0;
	return getpid() == 1 || (prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0) == 0 && on);
}

/* Starts the keeper with the caller's rights, through a go-between, so that it is no
 * child of the program (go_between says why), and from an empty environment (no
 * LD_PRELOAD); waits for its "ready". */
static void spawn_locked(void)
{
	char dir[PATH_MAX];
	if (!keeper_exe[0]) {
		say_no_keeper("not found next to the shim", -ENOENT);
		return;
	}
	if (pl_seccomp_filtered()) {
		say_no_keeper("the process runs under a seccomp filter, which may not allow it", 0);
		return;
	}
	/* An orphan goes to the nearest ancestor that takes orphans: when that is this
	 * process, or a profiled one it was forked from, the keeper would be a child of
	 * the program after all, seen by its wait() for all children, which would wait
	 * for it until this process exits. No process made here can avoid that, so no
	 * keeper starts; the files this process cannot write are lost, and said so. A
	 * subreaper set after a keeper started changes nothing: the keeper was already
	 * re-parented when the go-between left, before this returns. */
	if (reaps_orphans()) {
		say_no_keeper("it would become a child of this process, which takes orphaned "
			      "processes: a child subreaper, or pid 1 of its pid namespace",
			      0);
		return;
	}
	if (ancestor_reaps) {
		say_no_keeper("it would become a child of the process this one was forked "
			      "from, which takes orphaned processes: a child subreaper, or pid 1 "
			      "of its pid namespace",
			      0);
		return;
	}
	if (out_dir(dir) != 0)
		return; /* a template with % in its folders: no one directory to keep */
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		say_no_keeper("socketpair", -errno);
		return;
	}
	int one = 1;
	setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	char pid[24];
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	char *argv[] = {keeper_exe, pl_cfg.out, pid, NULL};
	struct spawn_arg a = {.sock = sv[1], .argv = argv, .keeper = -ECHILD};
	sigset_t old;
	pl_sig_block_all(&old);
	pid_t b =
	    clone(go_between, between_stack + sizeof(between_stack), CLONE_VM | CLONE_VFORK, &a);
	int err = errno;
	pl_sig_restore(&old);
	close(sv[1]);
	if (b < 0 || a.keeper < 0) {
		close(sv[0]);
		if (b >= 0)
			reap(b);
		say_no_keeper("clone", b < 0 ? -err : a.keeper);
		return;
	}
	reap(b);
	pid_t k = a.keeper;
	int rc = -EPIPE;
	int got = await_reply(sv[0], PL_KEEPER_WAIT_MS, &rc);
	if (got != 0 || rc != 0) {
		close(sv[0]);
		if (got == -ETIMEDOUT)
			kill(k, SIGKILL);
		say_no_keeper(keeper_exe, got != 0 ? got : rc);
		return;
	}
	if (pl_fd_adopt(&keeper_fd, sv[0]) != 0)
		return;
	keeper_pid = k;
	pl_publish_route(&route);
}

/* What before() did, for after(). */
struct creds_step {
	int active;  /* the shim looked at this call */
	int paused;  /* and stopped its threads around it */
	int handler; /* it may run in one of the program's signal handlers */
	int spawned; /* it started the keeper */
};

/* CPython calls the set*id functions holding the GIL, which the control thread may be
 * waiting for: release it while the shim's threads stop. Found with dlsym, like every
 * Python symbol the shim uses. */
typedef void *(*py_tstate_fn)(void);
typedef void (*py_restore_fn)(void *);

static void pause_threads(void)
{
	static py_tstate_fn current, mine, save;
	static py_restore_fn restore;
	static int looked;
	if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
		current = (py_tstate_fn)dlsym(RTLD_DEFAULT, "PyThreadState_GetUnchecked");
		if (!current)
			current = (py_tstate_fn)dlsym(RTLD_DEFAULT, "_PyThreadState_UncheckedGet");
		mine = (py_tstate_fn)dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
		save = (py_tstate_fn)dlsym(RTLD_DEFAULT, "PyEval_SaveThread");
		restore = (py_restore_fn)dlsym(RTLD_DEFAULT, "PyEval_RestoreThread");
		__atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
	}
	/* The thread holding the GIL is the one whose state is current (before 3.12 that
	 * is a process-wide pointer, so it must also be this thread's own state). */
	void *ts = NULL;
	if (current && mine && save && restore) {
		void *cur = current();
		if (cur && cur == mine())
			ts = save();
	}
	pl_control_threads_pause();
	if (ts)
		restore(ts);
}

struct caps {
	struct __user_cap_header_struct hdr;
	struct __user_cap_data_struct data[2];
};

static int get_caps(pid_t tid, struct caps *c)
{
	memset(c, 0, sizeof(*c));
	c->hdr.version = _LINUX_CAPABILITY_VERSION_3;
	c->hdr.pid = tid;
	return (int)syscall(SYS_capget, &c->hdr, c->data);
}

/* async-signal-safe: some other thread of the process has capabilities other than the
 * calling thread's (capset, and the effect of PR_SET_KEEPCAPS, are per thread), so a
 * set*id call that glibc runs on every thread may succeed on one and fail on another.
 * Reads /proc/self/task with system calls only. */
static int threads_differ(void)
{
	struct caps me, other;
	pid_t self = (pid_t)syscall(SYS_gettid);
	if (get_caps(self, &me) != 0)
		return 0;
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096] __attribute__((aligned(8)));
	int differ = 0;
	long n;
	while (!differ && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n && !differ;) {
			struct {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *d = (void *)(buf + off);
			off += d->reclen;
			pid_t tid = 0;
			for (const char *c = d->name; *c >= '0' && *c <= '9'; c++)
				tid = tid * 10 + (*c - '0');
			if (tid <= 0 || tid == self || get_caps(tid, &other) != 0)
				continue;
			differ = memcmp(me.data, other.data, sizeof(me.data)) != 0;
		}
	}
	close(fd);
	return differ;
}

/* keeper_lock, but never waited for where the code interrupted may be what holds it up
 * (the control thread's dump may wait for the allocator's lock that code holds). */
static int lock_keeper(int handler)
{
	if (!handler)
		return pthread_mutex_lock(&keeper_lock) == 0;
	return pthread_mutex_trylock(&keeper_lock) == 0;
}

/* The calling thread may write any file whatever its groups (CAP_DAC_OVERRIDE in its
 * effective set, as root has): a call that changes only groups leaves it able to. */
static int groups_irrelevant(void)
{
	struct caps me;
	return get_caps(0, &me) == 0 && (me.data[0].effective & (1u << CAP_DAC_OVERRIDE));
}

/* A call that sets the effective uid to `e` ((uid_t)-1: leaves it) may take the
 * directory away only if it changes it. */
static int uid_may_drop(uid_t e)
{
	return e != (uid_t)-1 && e != geteuid();
}

/* Before a credential change: if the threads' capabilities differ, the shim's stop
 * (outside signal handlers: joining and starting threads is not async-signal-safe);
 * a keeper starts while the directory is writable, if the call may take it away
 * (`may_drop`): not a call that leaves the effective uid as it is, nor one that
 * changes only groups of a thread they do not matter to. */
static void before(struct creds_step *s, int may_drop)
{
	s->active = s->paused = s->spawned = 0;
	struct pl_tls *t = &pl_tls_data;
	if (!pl_active || !pl_prof || t->guard || pl_ntls.dead || getpid() != pl_pid)
		return;
	t->guard = 1;
	s->active = 1;
	s->handler = pl_sig_maybe_in_handler();
	if (!s->handler && threads_differ()) {
		pause_threads();
		s->paused = 1;
	}
	if (may_drop && lock_keeper(s->handler)) {
		if (keeper_pid == 0 && dir_writable()) {
			spawn_locked();
			s->spawned = keeper_pid > 0;
		}
		pthread_mutex_unlock(&keeper_lock);
	}
	t->guard = 0;
}

/* After it: the keeper this call started goes if the directory is still writable (one
 * started by an earlier call stays: a process that took its rights back, as a server
 * acting for a user around each request does, will likely give them up again); the
 * shim's threads start again from this thread, with its credentials. */
static void after(const struct creds_step *s)
{
	if (!s->active)
		return;
	int saved = errno;
	struct pl_tls *t = &pl_tls_data;
	t->guard = 1;
	if (s->spawned && lock_keeper(s->handler)) {
		if (keeper_pid > 0 && dir_writable())
			dismiss_locked();
		pthread_mutex_unlock(&keeper_lock);
	}
	if (s->paused)
		pl_control_threads_resume();
	t->guard = 0;
	errno = saved;
}

#define REAL(name)                                                                                 \
	static __typeof__(name) *real;                                                             \
	if (!real)                                                                                 \
		real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                                \
	if (!real) {                                                                               \
		errno = ENOSYS;                                                                    \
		return -1;                                                                         \
	}

#define AROUND(may_drop, call)                                                                     \
	struct creds_step s;                                                                       \
	before(&s, may_drop);                                                                      \
	int rc = (call);                                                                           \
	after(&s);                                                                                 \
	return rc;

PL_EXPORT int setuid(uid_t uid)
{
	REAL(setuid);
	AROUND(uid_may_drop(uid), real(uid));
}

PL_EXPORT int setgid(gid_t gid)
{
	REAL(setgid);
	AROUND(!groups_irrelevant(), real(gid));
}

PL_EXPORT int seteuid(uid_t uid)
{
	REAL(seteuid);
	AROUND(uid_may_drop(uid), real(uid));
}

PL_EXPORT int setegid(gid_t gid)
{
	REAL(setegid);
	AROUND(!groups_irrelevant(), real(gid));
}

PL_EXPORT int setreuid(uid_t r, uid_t e)
{
	REAL(setreuid);
	AROUND(uid_may_drop(e), real(r, e));
}

PL_EXPORT int setregid(gid_t r, gid_t e)
{
	REAL(setregid);
	AROUND(!groups_irrelevant(), real(r, e));
}

PL_EXPORT int setresuid(uid_t r, uid_t e, uid_t s_)
{
	REAL(setresuid);
	AROUND(uid_may_drop(e), real(r, e, s_));
}

PL_EXPORT int setresgid(gid_t r, gid_t e, gid_t s_)
{
	REAL(setresgid);
	AROUND(!groups_irrelevant(), real(r, e, s_));
}

PL_EXPORT int setgroups(size_t n, const gid_t *list)
{
	REAL(setgroups);
	AROUND(!groups_irrelevant(), real(n, list));
}

PL_EXPORT int initgroups(const char *user, gid_t group)
{
	REAL(initgroups);
	AROUND(!groups_irrelevant(), real(user, group));
}

/* glibc exports capset without declaring it (libcap's header does). A capability
 * drop (CAP_DAC_OVERRIDE) can take the directory away from a root process. */
int capset(void *hdr, const void *data);
PL_EXPORT int capset(void *hdr, const void *data)
{
	REAL(capset);
	AROUND(1, real(hdr, data));
}

/* Sends `req` to the keeper (with descriptor `fd` when not -1) and returns its answer;
 * -EPIPE when it is gone (killed), and then it is let go: later dumps try the rename. */
static int ask_locked(int kfd, const struct pl_keep_req *req, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = {.iov_base = (void *)req, .iov_len = sizeof(*req)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	int rc = 0;
	if (sendmsg(kfd, &m, MSG_NOSIGNAL) < 0)
		rc = -errno;
	else if (await_reply(kfd, -1, &rc) != 0)
		rc = -EPIPE;
	if (rc == -EPIPE)
		dismiss_locked();
	return rc;
}

/* The keeper's descriptor when it should do the work: there is one and the directory
 * is not writable now. -1: the process does it itself. Called with keeper_lock. */
static int keeper_needed_locked(void)
{
	int kfd = keeper_pid > 0 ? pl_fd_get(&keeper_fd) : -1;
	return kfd >= 0 && !dir_writable() ? kfd : -1;
}

/* Through the keeper, when there is one and the directory is not writable now; else 1,
 * and publish.c has the engine write it. Called under control.c's lock. */
static int keeper_dump(unsigned n, int child, int clear)
{
	pthread_mutex_lock(&keeper_lock);
	int kfd = keeper_needed_locked();
	if (kfd < 0) {
		pthread_mutex_unlock(&keeper_lock);
		return 1;
	}
	int rc;
	int mfd = memfd_create("coprof-dump", MFD_CLOEXEC);
	if (mfd < 0) {
		rc = -errno;
		if (clear) /* the window is dropped, as coprof_dump_clear drops a failed one */
			coprof_clear(pl_prof);
	} else {
		rc = coprof_dump_fd(pl_prof, mfd, clear);
	}
	if (rc == 0) {
		struct pl_keep_req req = {.op = PL_KEEP_WRITE, .n = n, .child = (uint32_t)child};
		rc = ask_locked(kfd, &req, mfd);
	}
	if (mfd >= 0)
		close(mfd);
	pthread_mutex_unlock(&keeper_lock);
	return rc;
}

static int keeper_remove(unsigned n, int child)
{
	pthread_mutex_lock(&keeper_lock);
	int kfd = keeper_needed_locked();
	if (kfd < 0) {
		pthread_mutex_unlock(&keeper_lock);
		return 1;
	}
	struct pl_keep_req req = {.op = PL_KEEP_REMOVE, .n = n, .child = (uint32_t)child};
	int rc = ask_locked(kfd, &req, -1);
	pthread_mutex_unlock(&keeper_lock);
	return rc;
}

static const struct pl_publish_route route = {
    .dump = keeper_dump,
    .remove = keeper_remove,
};

void pl_creds_fork_prepare(void)
{
	parent_reaps = reaps_orphans();
}

/* A forked child has its own pid, so its own files: the parent's keeper is not its
 * (it answers only the parent), and a thread of the parent may have held the lock. */
void pl_creds_fork_child(void)
{
	ancestor_reaps = ancestor_reaps || parent_reaps;
	pthread_mutex_init(&keeper_lock, NULL);
	pl_publish_route(NULL);
	pl_fd_close(&keeper_fd);
	keeper_pid = 0;
}
