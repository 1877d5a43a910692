/* config.h: parsing the COPROF_* environment into struct pl_config (shim.h).
 * Pure: no global state, so the unit tests and the fuzzer call it directly. */
#ifndef PL_CONFIG_H
#define PL_CONFIG_H

#include <stddef.h>

#include "shim.h"

/* Reads every COPROF_* variable through `get` (getenv, or a test's table). On a bad
 * value returns -EINVAL and puts one line in err (no "coprof: " prefix, no newline);
 * *cfg then holds the defaults for what was not parsed yet. 0 when all are good. */
PL_HIDDEN int pl_config_parse(struct pl_config *cfg, const char *(*get)(const char *name),
			      char *err, size_t errlen);
/* COPROF_HZ and coprof record's --hz: a rate from PL_HZ_MIN to PL_HZ_MAX, the one
 * range check of it. CLOCK_MONOTONIC timers deliver up to about 10 kHz here. 0 or
 * -EINVAL. */
#define PL_HZ_MIN 1
#define PL_HZ_MAX 10000
PL_HIDDEN int pl_parse_hz(const char *s, unsigned *out);

/* The signal number for "USR2", "SIGUSR2", "12", "RTMIN+3"...; -EINVAL for anything
 * else, and for every signal but USR1, USR2 and the real-time ones (the program or
 * libc relies on them). "0" and "none" give 0 (no toggle signal). The one parser of
 * COPROF_SIGNAL and of coprof's --signal. */
PL_HIDDEN int pl_parse_signal(const char *s);

/* The path of dump number `n` (from 1) of process `pid` for template `tmpl`: %p is the
 * pid, %n the number, %% a percent sign. Without %n, dumps after the first get ".N"
 * before the extension; in a forked child (`child`), a template without %p gets
 * ".PID" the same way, so parent and child never share a file. 0 or -ENAMETOOLONG. */
PL_HIDDEN int pl_out_path(const char *tmpl, long pid, unsigned n, int child, char *buf, size_t len);

#endif
