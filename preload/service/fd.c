/* fd.c: the shim's own file descriptors, owned by identity (service.h). Adopt and close run
 * on whichever thread makes or drops the descriptor; pl_fd_get also runs in the toggle
 * signal's handler and in _exit, so it only calls fstat.
 *
 * libunwind, which the sampler runs in its tick handler, keeps a pipe of its own to
 * check addresses, at whatever numbers it got, and reads, writes and re-opens it: so
 * pipe() and pipe2() are interposed, and a pipe made while libunwind works for the
 * shim (pl_tls()->raw_masks set) goes to high numbers too, and is remembered by
 * identity: the sampler walks no stack while a number of it names something else. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "service.h"

/* Half the descriptor limit at most, so a program with a low limit still has room. */
static int floor_fd(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return PL_FD_FLOOR;
	if (rl.rlim_cur / 2 < PL_FD_FLOOR)
		return (int)(rl.rlim_cur / 2);
	return PL_FD_FLOOR;
}

/* async-signal-safe: `fd` moved above the floor (close-on-exec), or left as it is. */
static int raise_fd(int fd, int floor)
{
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, floor);
	if (hi < 0)
		return fd;
	close(fd);
	return hi;
}

int pl_fd_adopt(struct pl_fd *f, int fd)
{
	f->fd = -1;
	if (fd < 0)
		return -EBADF;
	fd = raise_fd(fd, floor_fd());
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	f->fd = fd;
	return 0;
}

/* async-signal-safe */
int pl_fd_get(const struct pl_fd *f)
{
	int fd = f->fd;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != f->dev || st.st_ino != f->ino)
		return -1;
	return fd;
}

void pl_fd_close(struct pl_fd *f)
{
	int fd = pl_fd_get(f);
	f->fd = -1;
	if (fd >= 0)
		close(fd);
}

static int (*real_pipe2)(int[2], int);

/* libunwind's pipe: the ends of the last pipe made while it worked for the shim. */
static struct pl_fd unw_pipe[2] = {PL_FD_NONE, PL_FD_NONE};

/* async-signal-safe */
static void note_unw(struct pl_fd *f, int fd)
{
	struct stat st;
	f->fd = -1;
	if (fstat(fd, &st) != 0)
		return;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	f->fd = fd;
}

/* async-signal-safe: libunwind reads and writes its pipe by number (one byte of the
 * address it checks), and closes both numbers when a read fails. A number that no
 * longer names its end, but something else, is the program's now: 0 then. A closed
 * number is safe (the read fails, libunwind makes a new pipe, which pipe2 notes). */
int pl_fd_unw_pipe_safe(void)
{
	for (int i = 0; i < 2; i++) {
		int fd = unw_pipe[i].fd;
		struct stat st;
		if (fd < 0 || fstat(fd, &st) != 0)
			continue;
		if (st.st_dev != unw_pipe[i].dev || st.st_ino != unw_pipe[i].ino)
			return 0;
	}
	return 1;
}

/* async-signal-safe (libunwind may make its pipe in the tick handler): the floor is
 * read once, outside any signal, by the first pipe of the process. */
PL_EXPORT int pipe2(int fds[2], int flags)
{
	static int floor = -1;
	if (!real_pipe2)
		real_pipe2 = (int (*)(int[2], int))dlsym(RTLD_NEXT, "pipe2");
	if (!real_pipe2) {
		errno = ENOSYS;
		return -1;
	}
	if (floor < 0 && !pl_tls_data.raw_masks)
		floor = floor_fd();
	int rc = real_pipe2(fds, flags);
	if (rc == 0 && pl_tls_data.raw_masks) {
		fds[0] = raise_fd(fds[0], floor < 0 ? PL_FD_FLOOR : floor);
		fds[1] = raise_fd(fds[1], floor < 0 ? PL_FD_FLOOR : floor);
		note_unw(&unw_pipe[0], fds[0]);
		note_unw(&unw_pipe[1], fds[1]);
	}
	return rc;
}

PL_EXPORT int pipe(int fds[2])
{
	return pipe2(fds, 0);
}
