/* test-malformed.c: the reader (libprof/pstat-read.c, marshal.c) given broken and
 * hostile input: every failure is an error code and a message, never a crash. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "marshal.h"
#include "sample-profile.h"
#include "test-file.h"

/* Reads `len` bytes that must be rejected with -EINVAL and a message. */
static void expect_rejected(const void *buf, size_t len, const char *why)
{
	struct cp_profile *p = (void *)1;
	char err[256] = "";
	int r = cp_profile_read_mem(buf, len, &p, err, sizeof(err));

	cr_expect_eq(r, -EINVAL, "%s: got %d (%s)", why, r, err);
	cr_expect_null(p, "%s", why);
	cr_expect_neq(err[0], '\0', "%s: no message", why);
}

#define REJECT(lit, why) expect_rejected(lit, sizeof(lit) - 1, why)

Test(malformed, empty_input_is_no_data)
{
	struct cp_profile *p;
	char err[128] = "";
	char dir[64], path[128];
	FILE *f;

	cr_expect_eq(cp_profile_read_mem("", 0, &p, err, sizeof(err)), -ENODATA);
	cr_expect_neq(err[0], '\0');
	tmp_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/empty.pstat", dir);
	f = fopen(path, "w");
	fclose(f);
	cr_expect_eq(cp_profile_read(path, &p, err, sizeof(err)), -ENODATA);
	cr_expect(strstr(err, path) != NULL, "%s", err);
	snprintf(path, sizeof(path), "%s/missing.pstat", dir);
	cr_expect_eq(cp_profile_read(path, &p, err, sizeof(err)), -ENOENT);
	cr_expect_eq(cp_profile_read(dir, &p, err, sizeof(err)), -EINVAL);
	remove_dir(dir);
}

/* Every strict prefix fails, except the one that ends right after the pstats dict:
 * that is a valid pstats file without extras, as cProfile writes them. */
static void truncate_everywhere(const unsigned char *buf, size_t len, size_t *boundary)
{
	struct cp_profile *p;
	char err[256];

	*boundary = 0;
	for (size_t n = 0; n < len; n++) {
		err[0] = '\0';
		int r = cp_profile_read_mem(buf, n, &p, err, sizeof(err));
		if (r == 0) {
			cr_expect_eq(p->ex.present, 0, "prefix %zu read as a coprof file", n);
			cr_expect_eq(*boundary, 0, "two valid prefixes: %zu and %zu", *boundary, n);
			*boundary = n;
			cp_profile_free(p);
			continue;
		}
		cr_expect(r == -EINVAL || (n == 0 && r == -ENODATA), "prefix %zu: %d", n, r);
		cr_expect_neq(err[0], '\0', "prefix %zu: no message", n);
	}
}

Test(malformed, truncated_coprof_file)
{
	struct cp_profile *p;
	unsigned char *buf;
	size_t len, boundary;

	cr_assert_eq(sample_profile(&p), 0);
	cr_assert_eq(cp_profile_encode(p, &buf, &len), 0);
	truncate_everywhere(buf, len, &boundary);
	cr_expect(boundary > 0 && boundary < len);
	free(buf);
	cp_profile_free(p);
}

Test(malformed, truncated_cprofile_and_yappi_files)
{
	static const char *const names[] = {"cprofile.pstat", "yappi.pstat", "marshal-v1.pstat"};
	char dir[64], path[160];
	unsigned char *buf;
	size_t len, boundary;

	foreign_files(dir, sizeof(dir));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		buf = slurp(path, &len);
		truncate_everywhere(buf, len, &boundary);
		cr_expect_eq(boundary, 0, "%s", names[i]);
		free(buf);
	}
	remove_dir(dir);
}

Test(malformed, wrong_shapes)
{
	REJECT("N", "None instead of a dict");
	REJECT("[\0\0\0\0", "a list instead of a dict");
	REJECT("{i\1\0\0\0N0", "int key");
	REJECT("{)\2z\1ai\1\0\0\0)\5i\1\0\0\0i\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0{00",
	       "key of two items");
	REJECT("{)\3z\1ai\1\0\0\0z\1bN0", "None value");
	REJECT("{)\3z\1ai\1\0\0\0z\1b)\4i\1\0\0\0i\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0"
	       "0",
	       "value of four items");
	REJECT("{)\3z\1ai\1\0\0\0z\1b)"
	       "\5i\377\377\377\377i\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0{00",
	       "negative count");
	REJECT("{)\3z\1ai\1\0\0\0z\1b)\5z\1xi\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0{00",
	       "str count");
	REJECT("{)\3z\1ai\1\0\0\0z\1b)\5i\1\0\0\0i\1\0\0\0z\0g\0\0\0\0\0\0\0\0{00", "str time");
	REJECT(
	    "{)\3z\1ai\1\0\0\0z\1b)\5i\1\0\0\0i\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0[\0\0\0\0"
	    "0",
	    "callers list");
	REJECT("{)\3z\1ai\1\0\0\0z\1b)\5i\1\0\0\0i\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0{)"
	       "\3z\1ai\1\0\0\0z\1bN00",
	       "None caller value");
	REJECT("{\xa9\3z\1ai\1\0\0\0z\1b)\5i\1\0\0\0i\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0{"
	       "0r\0\0\0\0)\5i\1\0\0\0i\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0{00",
	       "duplicate key");
	REJECT("{0N", "None after the pstats dict");
	REJECT("{0{0", "extras without a version");
	REJECT("{0{z\6coprofi\1\0\0\0z\5tasksN0", "tasks is None");
	REJECT("{0{z\6coprofi\1\0\0\0z\5tasks[\1\0\0\0i\0\0\0\0"
	       "0",
	       "task is an int");
	REJECT("{0{z\6coprofi\1\0\0\0z\6stacks[\1\0\0\0)\5i\5\0\0\0i\0\0\0\0)\0i\0\0\0\0F0",
	       "stack task out of range");
	REJECT("{0{z\6coprofi\1\0\0\0z\5clocki\0\0\0\0"
	       "0",
	       "clock is an int");
	REJECT("{0{z\6coprofi\1\0\0\0"
	       "0N",
	       "bytes after the extras");
}

Test(malformed, bad_marshal)
{
	REJECT("Q", "unknown type");
	REJECT("c\0\0\0\0", "code object");
	REJECT("(\1\0\0\0"
	       "0",
	       "NULL in a tuple");
	REJECT("(\xff\xff\xff\x7f", "huge tuple");
	REJECT("[\xff\xff\xff\xff", "negative list");
	REJECT("u\xff\xff\xff\x7f"
	       "abc",
	       "huge string");
	REJECT("l\xff\xff\xff\x7f\1\0", "huge long");
	REJECT("l\0\0\0\x80", "long of INT32_MIN digits");
	REJECT("l\1\0\0\0\0\x80", "long digit out of range");
	REJECT("l\1\0\0\0\0\0", "unnormalized long");
	REJECT("f\3x.5", "bad text float");
	REJECT("r\0\0\0\0", "reference to nothing");
	REJECT("r\xff\xff\xff\xff", "negative reference");
	REJECT("\xdb"
	       "r\0\0\0\0N0",
	       "reference to the dict being read");
	REJECT("{\xa9\3z\1ai\1\0\0\0z\1b)\5i\1\0\0\0i\1\0\0\0g\0\0\0\0\0\0\0\0g\0\0\0\0\0\0\0\0{"
	       "r\0\0\0\0N00",
	       "reference to the key being read");
	REJECT("g\0\0\0", "short float");
}

Test(malformed, deep_nesting)
{
	size_t n = 100000;
	unsigned char *buf = malloc(n * 2);

	for (size_t i = 0; i < n; i++) {
		buf[2 * i] = ')';
		buf[2 * i + 1] = 1;
	}
	expect_rejected(buf, n * 2, "deep tuples");
	memset(buf, '{', n);
	expect_rejected(buf, n, "deep dicts");
	free(buf);
}

/* One callers dict shared by every function through marshal references: each
 * reference costs 5 bytes but would cost the whole dict to convert. */
Test(malformed, shared_objects_cannot_multiply_work)
{
	size_t nf = 20000, ne = 20000;
	struct cp_mw w;
	unsigned char *enc;
	size_t enclen;
	uint32_t dref = 0, ref;
	clock_t t0 = clock();

	cp_mw_init(&w, -1);
	cp_mw_begin_object(&w);
	cp_mw_dict_begin(&w);
	for (size_t i = 0; i < nf; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%zu", i);
		cp_mw_tuple(&w, 3, &ref);
		cp_mw_str(&w, "a.py", 4, NULL);
		cp_mw_int(&w, 1);
		cp_mw_str(&w, name, strlen(name), NULL);
		cp_mw_tuple(&w, 5, NULL);
		cp_mw_int(&w, 1);
		cp_mw_int(&w, 1);
		cp_mw_float(&w, 0);
		cp_mw_float(&w, 0);
		if (i == 0) {
			/* the shared dict: every function is a caller */
			dref = w.nrefs;
			cp_mw_dict_begin(&w);
			w.buf[w.len - 1] |= 0x80; /* FLAG_REF: the dict gets index dref */
			w.nrefs++;
			for (size_t j = 0; j < ne; j++) {
				char cn[32];
				snprintf(cn, sizeof(cn), "c%zu", j);
				cp_mw_tuple(&w, 3, NULL);
				cp_mw_str(&w, "a.py", 4, NULL);
				cp_mw_int(&w, 2);
				cp_mw_str(&w, cn, strlen(cn), NULL);
				cp_mw_int(&w, 1);
			}
			cp_mw_dict_end(&w);
		} else {
			cp_mw_ref(&w, dref);
		}
	}
	cp_mw_dict_end(&w);
	cr_assert_eq(cp_mw_take(&w, &enc, &enclen), 0);
	cp_mw_fini(&w);
	expect_rejected(enc, enclen, "shared callers dict");
	cr_expect(clock() - t0 < 5 * CLOCKS_PER_SEC);
	free(enc);
}

/* Random damage to a valid file: any result is fine but a crash or a silent error. */
Test(malformed, random_mutations, .timeout = 100)
{
	struct cp_profile *p, *q;
	unsigned char *buf, *m;
	size_t len;
	unsigned seed = 12345;
	char err[256];

	cr_assert_eq(sample_profile(&p), 0);
	cr_assert_eq(cp_profile_encode(p, &buf, &len), 0);
	m = malloc(len);
	for (int round = 0; round < 5000; round++) {
		memcpy(m, buf, len);
		int flips = 1 + rand_r(&seed) % 4;
		for (int k = 0; k < flips; k++) {
			size_t at = (size_t)rand_r(&seed) % len;
			switch (rand_r(&seed) % 3) {
			case 0:
				m[at] ^= (unsigned char)(1u << (rand_r(&seed) % 8));
				break;
			case 1:
				m[at] = (unsigned char)rand_r(&seed);
				break;
			default:
				m[at] = "\0\xff\x7f\x80r)({0"[rand_r(&seed) % 10];
			}
		}
		err[0] = '\0';
		int r = cp_profile_read_mem(m, len, &q, err, sizeof(err));
		if (r == 0) {
			cp_profile_free(q);
		} else {
			cr_assert(r == -EINVAL, "round %d: %d", round, r);
			cr_assert_neq(err[0], '\0', "round %d: no message", round);
		}
	}
	free(m);
	free(buf);
	cp_profile_free(p);
}
