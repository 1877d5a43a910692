/* keeper.h: what the shim (creds.c) and coprof-keeper (keeper.c) say to each other.
 *
 * A process about to change its credentials starts coprof-keeper while it still may
 * write the profile's directory. The keeper keeps those rights and publishes, for that
 * one process, the files it can no longer make itself. They talk over a SOCK_SEQPACKET
 * socketpair: the keeper's end is its descriptor PL_KEEPER_FD, with SO_PASSCRED, so
 * the kernel tells it who sent each request. */
#ifndef PL_KEEPER_H
#define PL_KEEPER_H

#include <stdint.h>

#define PL_KEEPER_FD 3		       /* the keeper's end of the socketpair */
#define PL_KEEPER_NAME "coprof-keeper" /* the program, next to the shim */

enum pl_keep_op {
	PL_KEEP_WRITE = 1,  /* publish dump number n: the request carries a descriptor
			     * holding the file's bytes (a memfd), read from offset 0 */
	PL_KEEP_REMOVE = 2, /* remove dump number n (COPROF_KEEP) */
};

/* One request. The path is the keeper's to make, from the template and the pid it was
 * started with: the process names only a number, so it cannot make the keeper write
 * anything but its own profiles. */
struct pl_keep_req {
	uint32_t op;	/* enum pl_keep_op */
	uint32_t n;	/* dump number, from 1 */
	uint32_t child; /* the process is a forked child (pl_out_path's `child`) */
	uint32_t pad;
};

/* The answer to each request, and the keeper's first message once it runs (rc 0): 0 or
 * -errno, or a COPROF_E* code (coprof.h) for what stands at the path. */
struct pl_keep_reply {
	int32_t rc;
};

#endif
