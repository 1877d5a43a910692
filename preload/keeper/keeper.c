/* keeper.c: coprof-keeper, which publishes the profiles of one process that gave up
 * the right to write them (setuid, setgid, setgroups, capset... after coprof set up).
 *
 * lifecycle/creds.c starts it, just before the process's credential change, with the rights the
 * process had then; it serves requests on PL_KEEPER_FD (keeper.h) until the process
 * closes its end (exit, exec, or the directory is writable after all). It makes only
 * the paths COPROF_OUT gives for that pid, in the directory it opened at start, through
 * a temporary name and rename(2) as the engine does (cp_publish), so "never half a
 * file" holds; it follows no symbolic link, gives each file to the user and group the
 * process runs as when it asks, and keeps only the capabilities that takes. Single-threaded; every
 * signal stays blocked (the mask it was started with), so it ends only when the
 * process is gone, or by SIGKILL. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "coprof-private.h"
#include "coprof.h"
#include "keeper.h"
#include "state/state.h"

static const char *tmpl; /* COPROF_OUT */
static long host;	 /* the pid served */
static int dirfd_;	 /* the directory of every path, opened at start */
static unsigned char buf[1 << 16];

/* The last component of dump number `n`'s path: its directory is the template's, which
 * holds no % (creds.c starts no keeper otherwise). */
static int base_name(unsigned n, int child, char out[PATH_MAX])
{
	char path[PATH_MAX];
	int rc = pl_out_path(tmpl, host, n, child, path, sizeof(path));
	if (rc != 0)
		return rc;
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	if (!*base)
		return -EISDIR;
	snprintf(out, PATH_MAX, "%s", base);
	return 0;
}

/* The bytes of descriptor `from` (the process's memfd) into `to`, from offset 0. */
static int copy_all(void *arg, int to)
{
	int from = *(const int *)arg;
	off_t off = 0;
	for (;;) {
		ssize_t r = pread(from, buf, sizeof(buf), off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		off += r;
		for (ssize_t done = 0; done < r;) {
			ssize_t w = write(to, buf + done, (size_t)(r - done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -errno;
			done += w;
		}
	}
}

/* Publishes the bytes of `from` as dump number `n`, owned by uid:gid, as the engine
 * publishes a dump (cp_publish), but in the directory opened at start and through no
 * symbolic link, since the keeper has rights the process has not. A keeper that is not
 * root may not give the file away: then it stays the one of the ids the process had
 * when the keeper started. */
static int publish(unsigned n, int child, int from, uid_t uid, gid_t gid)
{
	char base[PATH_MAX];
	int rc = base_name(n, child, base);
	if (rc != 0)
		return rc;
	return cp_publish(&(struct cp_publish){
	    .dirfd = dirfd_,
	    .path = base,
	    .pid = host,
	    .tag = "k",
	    .chown = 1,
	    .uid = uid,
	    .gid = gid,
	    .fill = copy_all,
	    .arg = &from,
	});
}

static int remove_dump(unsigned n, int child)
{
	char base[PATH_MAX];
	int rc = base_name(n, child, base);
	if (rc == 0 && unlinkat(dirfd_, base, 0) != 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

static void reply(int rc)
{
	struct pl_keep_reply r = {.rc = rc};
	ssize_t w = send(PL_KEEPER_FD, &r, sizeof(r), MSG_NOSIGNAL);
	(void)w;
}

/* One request: 0 to go on, -1 when the process has closed its end. */
static int serve(void)
{
	struct pl_keep_req req;
	union {
		char b[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = &req, .iov_len = sizeof(req)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl.b,
			   .msg_controllen = sizeof(ctl.b)};
	ssize_t r = recvmsg(PL_KEEPER_FD, &m, MSG_CMSG_CLOEXEC);
	if (r < 0 && errno == EINTR)
		return 0;
	if (r <= 0)
		return -1;
	int fd = -1, have_cred = 0;
	struct ucred cred;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_RIGHTS) {
			int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < n; i++) {
				int got;
				memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (fd < 0)
					fd = got;
				else
					close(got);
			}
		} else if (c->cmsg_type == SCM_CREDENTIALS) {
			memcpy(&cred, CMSG_DATA(c), sizeof(cred));
			have_cred = 1;
		}
	}
	int rc;
	if (r != (ssize_t)sizeof(req) || (m.msg_flags & MSG_CTRUNC) || !have_cred ||
	    cred.pid != (pid_t)host || req.n == 0)
		rc = -EPERM;
	else if (req.op == PL_KEEP_WRITE && fd >= 0)
		rc = publish(req.n, req.child != 0, fd, cred.uid, cred.gid);
	else if (req.op == PL_KEEP_REMOVE)
		rc = remove_dump(req.n, req.child != 0);
	else
		rc = -EINVAL;
	if (fd >= 0)
		close(fd);
	reply(rc);
	return 0;
}

/* Keeps only the capabilities publishing needs (writing and searching directories
 * whatever their modes, giving files away) and can gain none by exec. Best effort: a
 * keeper that has no capabilities loses nothing. */
static void narrow(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) == 0) {
		uint32_t keep = (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH) |
				(1u << CAP_CHOWN) | (1u << CAP_FOWNER);
		data[0].effective &= keep;
		data[0].permitted &= keep;
		data[0].inheritable = 0;
		data[1].effective = data[1].permitted = data[1].inheritable = 0;
		syscall(SYS_capset, &hdr, data);
	}
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* coprof-keeper TEMPLATE PID: started by creds.c, never by hand. Says "ready" (rc 0)
 * once the directory is open, or why not (then ends). */
int main(int argc, char **argv)
{
	char dir[PATH_MAX];
	if (argc != 3)
		return 2;
	tmpl = argv[1];
	host = atol(argv[2]);
	const char *slash = strrchr(tmpl, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == tmpl)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - tmpl), tmpl);
	prctl(PR_SET_NAME, PL_KEEPER_NAME, 0, 0, 0);
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd_ < 0 || host <= 0) {
		reply(dirfd_ < 0 ? -errno : -EINVAL);
		return 1;
	}
	narrow();
	reply(0);
	while (serve() == 0)
		;
	return 0;
}
