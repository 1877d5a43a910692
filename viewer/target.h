/* target.h: a process running the shim, as `coprof toggle`, `attach` and `detach` see
 * it from outside (cmd-toggle.c): the shim's mapping, its control thread and the state
 * that thread's name publishes, and one request sent to it and waited for. */
#ifndef VW_TARGET_H
#define VW_TARGET_H

#include <stddef.h>
#include <sys/types.h>

#include "state/state.h"

struct vw_target {
	pid_t pid;
	pid_t tid; /* the control thread */
	struct pl_toggle_state st;
};

/* The command named at the head of the lines vw_send_and_wait writes. */
extern const char *vw_toggle_who;

/* A pid: a positive decimal that fits pid_t, nothing else; -1 if not. */
pid_t vw_parse_pid(const char *s);
/* 1: the shim is mapped in pid, 0: it is not; -errno if its maps cannot be read. */
int vw_shim_mapped(pid_t pid);
/* Finds the control thread of t->pid: 0 with t->tid and t->st, -ENOENT, or -errno. */
int vw_find_control(struct vw_target *t);
/* Sends PL_REQ_* `req` (through the shim's control pipe, else the toggle signal)
 * and waits until the control thread applied it (`timeout` s);
 * says on stdout what the process did. 0, 1 on failure (said on stderr). */
int vw_send_and_wait(struct vw_target *t, int req, double timeout);
/* The output template an attached shim uses (cmd-attach.c reads it from the
 * process's memory): 0, or -ENOENT when the shim was not attached (or it cannot be
 * read). */
int vw_attached_out(pid_t pid, char *buf, size_t len);
/* The shim takes requests through its control pipe, which this writes through
 * /proc/PID/fd (no signal: its handler would end a sleep of the program's early): 0
 * sent, -errno when the pipe cannot be reached (no permission, not the shim's any
 * more, or no attach support in this build), and the request is then for the toggle
 * signal. */
int vw_control_request(pid_t pid, int req);

/* The shim: $COPROF_PRELOAD, else beside this binary's install or in the build tree
 * (cmd-record.c). 0 with its real path in out, or -1. */
int vw_find_preload(char *out, size_t len);

#endif
