/* fmt.c: numbers, keys and strings as view, report, export and diff print them.
 * Pure functions; no curses, no state. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "fmt.h"

void vw_fmt_time(char *buf, size_t len, double s, int width)
{
	if (!isfinite(s)) {
		snprintf(buf, len, "%s", isnan(s) ? "nan" : s > 0 ? "inf" : "-inf");
		return;
	}
	for (int prec = 6; prec >= 0; prec--) {
		int n = snprintf(buf, len, "%.*f", prec, s);
		if (n <= width)
			return;
	}
	for (int prec = 3; prec >= 0; prec--) {
		int n = snprintf(buf, len, "%.*e", prec, s);
		if (n <= width)
			return;
	}
}

void vw_fmt_calls(char *buf, size_t len, const struct cp_stat *s)
{
	if (s->nc == s->cc)
		snprintf(buf, len, "%" PRIu64, s->nc);
	else
		snprintf(buf, len, "%" PRIu64 "/%" PRIu64, s->nc, s->cc);
}

void vw_fmt_where(char *buf, size_t len, const struct cp_key *k)
{
	snprintf(buf, len, "%s:%" PRIu64, vw_shown(k->file ? k->file : ""), k->line);
}

void vw_fmt_stack(char *buf, size_t len, const struct cp_key *frames, uint32_t depth,
		  const char *sep, int where)
{
	size_t o = 0;
	buf[0] = 0;
	for (uint32_t k = 0; k < depth && o < len; k++) {
		char at[1200] = "";
		if (where)
			vw_fmt_where(at, sizeof(at), &frames[k]);
		int w = snprintf(buf + o, len - o, "%s%s%s%s%s", k ? sep : "", frames[k].name,
				 where ? " (" : "", at, where ? ")" : "");
		o += w > 0 ? (size_t)w : 0;
	}
}

const char *vw_shown(const char *s)
{
	static char bufs[8][4096];
	static unsigned next;
	char *buf = bufs[next++ % 8];
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (o + 5 >= sizeof(bufs[0]))
			break;
		if (*p < 0x20 || *p == 0x7f)
			o += (size_t)snprintf(buf + o, 5, "\\x%02x", *p);
		else
			buf[o++] = (char)*p;
	}
	buf[o] = 0;
	return buf;
}

/* Length of the UTF-8 sequence starting with byte c (1 for a stray byte). */
static int seq_len(unsigned char c)
{
	if (c >= 0xf0 && c < 0xf8)
		return 4;
	if (c >= 0xe0)
		return c < 0xf0 ? 3 : 1;
	if (c >= 0xc0)
		return 2;
	return 1;
}

static int count_chars(const char *s, size_t n)
{
	int chars = 0;
	for (size_t i = 0; i < n; i += (size_t)seq_len((unsigned char)s[i]))
		chars++;
	return chars;
}

int vw_fit(char *buf, size_t len, const char *s, int width, int left)
{
	size_t n = strlen(s);
	if (width <= 0 || len < 2) {
		if (len)
			buf[0] = 0;
		return 0;
	}
	int chars = count_chars(s, n);
	if (chars <= width) {
		size_t k = n < len - 1 ? n : len - 1;
		memcpy(buf, s, k);
		buf[k] = 0;
		return chars;
	}
	/* Keep width - 1 characters and mark the cut with "~". */
	int keep = width - 1;
	size_t at = 0, from = 0, to = n;
	if (left) {
		for (int skip = chars - keep; skip > 0 && from < n; skip--)
			from += (size_t)seq_len((unsigned char)s[from]);
		buf[at++] = '~';
	} else {
		to = 0;
		for (int k = 0; k < keep && to < n; k++)
			to += (size_t)seq_len((unsigned char)s[to]);
		if (to > n)
			to = n;
	}
	size_t k = to > from ? to - from : 0;
	if (at + k + 2 > len)
		k = len - at - 2;
	memcpy(buf + at, s + from, k);
	at += k;
	if (!left)
		buf[at++] = '~';
	buf[at] = 0;
	return width;
}

/* 1 if p starts a well-formed UTF-8 sequence of n bytes (n from seq_len). */
static int utf8_ok(const unsigned char *p, int n)
{
	if (n == 1)
		return *p < 0x80;
	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return 1;
}

void vw_put_json(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p >= 0x80) {
			/* JSON must be UTF-8: a stray byte becomes U+FFFD. */
			int n = seq_len(*p);
			if (n > 1 && utf8_ok(p, n)) {
				fwrite(p, 1, (size_t)n, f);
				p += n - 1;
			} else {
				fputs("\\ufffd", f);
			}
		} else if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p == '\t')
			fputs("\\t", f);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void vw_put_csv(FILE *f, const char *s)
{
	s = s ? s : "";
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}
