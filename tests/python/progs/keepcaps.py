"""Drops privileges as setpriv does, from Python (issue 20): PR_SET_KEEPCAPS, then
os.setresuid, then capset through a raw system call (so no interposer sees it), then
os.setresgid and os.setgroups. The capability calls change only the calling thread;
glibc runs each set*id call on every thread and aborts the process if one fails where
another succeeds, so the shim's own threads must match the main thread by then. It has
no thread of its own (one still exiting would make it abort, profiled or not).
argv[1]: the uid and gid to switch to. Prints "ok UID GID"."""
import ctypes
import os
import sys

PR_SET_KEEPCAPS = 8
SYS_CAPSET = 126  # x86_64
libc = ctypes.CDLL(None, use_errno=True)


def work():
    return sum(range(200000))


def main():
    uid = int(sys.argv[1])
    work()
    if libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        sys.exit("prctl: errno %d" % ctypes.get_errno())
    os.setresuid(uid, uid, uid)
    hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()
    if libc.capget(hdr, data) != 0:
        sys.exit("capget: errno %d" % ctypes.get_errno())
    data[0], data[3] = data[1], data[4]  # effective = permitted (kept by KEEPCAPS)
    if libc.syscall(SYS_CAPSET, hdr, data) != 0:
        sys.exit("capset: errno %d" % ctypes.get_errno())
    os.setresgid(uid, uid, uid)
    os.setgroups([])
    work()
    print("ok", os.getuid(), os.getgid())


main()
