/* cli.h: what the commands share on the command line: options with --help and usage
 * errors answered alike, loading files with one clear message and exit status 2, and
 * numeric option parsing. */
#ifndef VW_CLI_H
#define VW_CLI_H

#include <getopt.h>
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

/* The next option of a command's arguments, as getopt_long gives it (call it with
 * optind set to 1 first), but --help (-h) and an unknown option are answered as every
 * command answers them: its usage on stdout and *status 0, or on stderr and *status 2;
 * then -1, as at the end. After its loop the command returns *status unless it is -1. */
int vw_cli_opt(int argc, char **argv, const char *shortopts, const struct option *opts,
	       void (*usage)(FILE *f), int *status);

/* Parses a whole non-negative decimal number. 0 or -EINVAL. */
int vw_parse_u64(const char *s, uint64_t *out);

#endif
