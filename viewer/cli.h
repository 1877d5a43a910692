/* cli.h: what report, export and diff share on the command line: loading files with
 * one clear message and exit status 2, and numeric option parsing. */
#ifndef VW_CLI_H
#define VW_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* Loads the files into `m`. On failure prints "coprof CMD: FILE: why" on stderr and
 * returns 2 (the exit status); 0 on success. */
int vw_cli_load(struct vw_model *m, const char *cmd, char *const *paths, int n);

/* Ends the command's output on `f` (stdout, or the file named `name`): flushes it (and
 * closes it unless it is stdout). A write that failed at any point (a full disk,
 * /dev/full, a closed pipe) gives "coprof CMD: NAME: why" on stderr and 2; else 0. */
int vw_cli_finish(FILE *f, const char *cmd, const char *name);

/* Parses a whole non-negative decimal number. 0 or -EINVAL. */
int vw_parse_u64(const char *s, uint64_t *out);

#endif
