/* fd.c: the shim's own file descriptors, owned by identity (fd.h). Adopt and close run
 * on whichever thread makes or drops the descriptor; pl_fd_get also runs in the toggle
 * signal's handler and in _exit, so it only calls fstat.
 *
 * libunwind, which the sampler runs in its tick handler, keeps a pipe of its own to
 * check addresses, at whatever numbers it got, and reads, writes and re-opens it: so
 * pipe() and pipe2() are interposed, and a pipe made while libunwind works for the
 * shim (pl_tls()->raw_masks set) goes to high numbers too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd.h"
#include "internal.h"

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
	}
	return rc;
}

PL_EXPORT int pipe(int fds[2])
{
	return pipe2(fds, 0);
}
