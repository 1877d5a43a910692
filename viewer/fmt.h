/* fmt.h: how numbers, keys and strings are printed by view, report, export and diff,
 * so that every output agrees. Pure functions over the model; no curses. */
#ifndef VW_FMT_H
#define VW_FMT_H

#include <stddef.h>
#include <stdio.h>

#include "profile.h"

/* Seconds in at most `width` characters: as many of six decimals as fit (yappi prints
 * %0.6f), then exponent form. */
void vw_fmt_time(char *buf, size_t len, double s, int width);

/* ncall as cProfile prints it: "nc", or "nc/cc" when some calls were recursive. */
void vw_fmt_calls(char *buf, size_t len, const struct cp_stat *s);

/* "file:line", as pstats shows a key's place. */
void vw_fmt_where(char *buf, size_t len, const struct cp_key *k);

/* The names of `depth` frames joined by `sep`, each followed by " (file:line)" when
 * `where`; cut at len. */
void vw_fmt_stack(char *buf, size_t len, const struct cp_key *frames, uint32_t depth,
		  const char *sep, int where);

/* Copies `s` into buf (len > width) cut to `width` characters, counting UTF-8
 * sequences as one; cut ones end in "~" if `left` is 0 or start with "~" if it is 1
 * (which keeps a path's tail). Returns the number of characters written. */
int vw_fit(char *buf, size_t len, const char *s, int width, int left);

/* `s` for a terminal or a line-based format: each control character (below 0x20, and
 * 0x7f) as "\xHH", so a name can neither move the cursor nor start a new line. The
 * result is in one of 8 static buffers used in turn (single-threaded callers; up to 8
 * in one printf), cut at 4 KiB. */
const char *vw_shown(const char *s);

/* `s` as a JSON string literal, and as a CSV field (quoted only when needed). */
void vw_put_json(FILE *f, const char *s);
void vw_put_csv(FILE *f, const char *s);

#endif
