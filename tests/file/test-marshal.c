/* test-marshal.c: the marshal writer and parser (libprof/marshal.c) against what
 * Python's marshal.dump emits, and against themselves. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marshal.h"
#include "test-file.h"

static const struct cp_mval *item(const struct cp_mval *list, uint32_t i)
{
	cr_assert(list->type == CP_M_LIST || list->type == CP_M_TUPLE);
	cr_assert_lt(i, list->n);
	return &list->v.items[i];
}

static void expect_int(const struct cp_mval *v, int64_t want)
{
	cr_expect_eq(v->type, CP_M_INT, "type %s", cp_mtype_name(v));
	cr_expect_eq(v->v.i, want);
}

static void expect_str(const struct cp_mval *v, const char *want)
{
	cr_expect_eq(v->type, CP_M_STR, "type %s", cp_mtype_name(v));
	cr_expect_eq(v->n, strlen(want));
	cr_expect_eq(memcmp(v->v.s, want, v->n), 0);
}

/* The list TYPES of gen_foreign.py, as Python 3 dumped it (version 4). */
Test(marshal, parses_every_plain_python_type)
{
	char dir[64], path[128], err[256];
	struct cp_arena *a = cp_arena_new();
	struct cp_mval v;
	unsigned char *buf;
	size_t len, pos = 0;
	const struct cp_mval *t;

	foreign_files(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/types.marshal", dir);
	buf = slurp(path, &len);
	cr_assert_eq(cp_marshal_parse(buf, len, &pos, a, &v, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(pos, len);
	cr_assert_eq(v.type, CP_M_LIST);
	cr_assert_eq(v.n, 33);
	cr_expect_eq(item(&v, 0)->type, CP_M_NONE);
	cr_expect(item(&v, 1)->type == CP_M_BOOL && item(&v, 1)->v.i == 1);
	cr_expect(item(&v, 2)->type == CP_M_BOOL && item(&v, 2)->v.i == 0);
	expect_int(item(&v, 3), 0);
	expect_int(item(&v, 4), -1);
	expect_int(item(&v, 5), INT32_MAX);
	expect_int(item(&v, 6), INT32_MIN);
	expect_int(item(&v, 7), 1LL << 31);
	expect_int(item(&v, 8), INT64_MAX);
	cr_expect(item(&v, 9)->type == CP_M_UINT && item(&v, 9)->v.u == 1ULL << 63);
	cr_expect(item(&v, 10)->type == CP_M_UINT && item(&v, 10)->v.u == UINT64_MAX);
	cr_expect(item(&v, 11)->type == CP_M_HUGE && item(&v, 11)->v.f == 18446744073709551616.0);
	cr_expect(item(&v, 12)->type == CP_M_HUGE && item(&v, 12)->v.f == -ldexp(1, 70));
	cr_expect(item(&v, 13)->type == CP_M_FLOAT && item(&v, 13)->v.f == 1.5);
	cr_expect(item(&v, 14)->type == CP_M_FLOAT && signbit(item(&v, 14)->v.f));
	cr_expect(item(&v, 15)->type == CP_M_FLOAT && isinf(item(&v, 15)->v.f));
	expect_str(item(&v, 16), "");
	expect_str(item(&v, 17), "ascii");
	cr_expect(item(&v, 18)->type == CP_M_STR && item(&v, 18)->n == 300);
	expect_str(item(&v, 19), "n\xc3\xb6n");
	expect_str(item(&v, 20), "\xf0\x9f\x9a\x80");
	cr_expect(item(&v, 21)->type == CP_M_BYTES && item(&v, 21)->n == 5);
	cr_expect(item(&v, 22)->type == CP_M_TUPLE && item(&v, 22)->n == 0);
	cr_expect(item(&v, 23)->type == CP_M_TUPLE && item(&v, 23)->n == 1);
	t = item(&v, 24);
	cr_assert(t->type == CP_M_TUPLE && t->n == 300);
	expect_int(item(t, 299), 299);
	t = item(&v, 25);
	cr_assert(t->type == CP_M_LIST && t->n == 2);
	expect_int(item(item(item(t, 1), 1), 0), 3);
	t = item(&v, 26);
	cr_assert(t->type == CP_M_DICT && t->n == 1);
	expect_str(&t->v.items[0], "k");
	cr_expect_eq(t->v.items[1].type, CP_M_TUPLE);
	cr_expect(item(&v, 27)->type == CP_M_SET && item(&v, 27)->n == 2);
	cr_expect(item(&v, 28)->type == CP_M_SET && item(&v, 28)->n == 0);
	cr_expect(item(&v, 29)->type == CP_M_SET && item(&v, 29)->n == 1);
	for (int i = 30; i < 33; i++)
		cr_expect_eq(item(&v, (uint32_t)i)->type, CP_M_OTHER);
	free(buf);
	cp_arena_free(a);
	remove_dir(dir);
}

/* Every writer call, parsed back. */
Test(marshal, writer_output_parses_back)
{
	static const int64_t ints[] = {0,
				       1,
				       -1,
				       INT32_MAX,
				       INT32_MIN,
				       (int64_t)INT32_MAX + 1,
				       (int64_t)INT32_MIN - 1,
				       INT64_MAX,
				       INT64_MIN,
				       1LL << 45};
	static const uint64_t uints[] = {0, INT32_MAX, 1ULL << 31, 1ULL << 63, UINT64_MAX};
	struct cp_arena *a = cp_arena_new();
	struct cp_mw w;
	struct cp_mval v;
	unsigned char *buf;
	size_t len, pos = 0;
	uint32_t ref = 9, ref2 = 9;
	char err[256];
	const size_t nints = sizeof(ints) / sizeof(ints[0]),
		     nuints = sizeof(uints) / sizeof(uints[0]);

	cp_mw_init(&w, -1);
	cp_mw_begin_object(&w);
	cp_mw_list(&w, (uint32_t)(nints + nuints + 9));
	for (size_t i = 0; i < nints; i++)
		cp_mw_int(&w, ints[i]);
	for (size_t i = 0; i < nuints; i++)
		cp_mw_uint(&w, uints[i]);
	cp_mw_float(&w, -2.5);
	cp_mw_float(&w, NAN);
	cp_mw_none(&w);
	cp_mw_bool(&w, 1);
	cp_mw_tuple(&w, 300, &ref);
	for (int i = 0; i < 300; i++)
		cp_mw_str(&w, "\xc3\xa9", 2, i == 0 ? &ref2 : NULL);
	cp_mw_ref(&w, ref);
	cp_mw_ref(&w, ref2);
	cp_mw_dict_begin(&w);
	cp_mw_str(&w, "k", 1, NULL);
	cp_mw_str(&w, "", 0, NULL);
	cp_mw_dict_end(&w);
	cp_mw_list(&w, 0);
	cr_expect_eq(ref, 0);
	cr_expect_eq(ref2, 1);
	cr_assert_eq(cp_mw_take(&w, &buf, &len), 0);
	cp_mw_fini(&w);

	cr_assert_eq(cp_marshal_parse(buf, len, &pos, a, &v, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(pos, len);
	for (size_t i = 0; i < nints; i++)
		expect_int(item(&v, (uint32_t)i), ints[i]);
	for (size_t i = 0; i < nuints; i++) {
		const struct cp_mval *u = item(&v, (uint32_t)(nints + i));
		cr_expect_eq(u->type == CP_M_UINT ? u->v.u : (uint64_t)u->v.i, uints[i]);
	}
	cr_expect_eq(item(&v, nints + nuints)->v.f, -2.5);
	cr_expect_eq(item(&v, nints + nuints + 1)->v.f, 0.0);
	cr_expect_eq(item(&v, nints + nuints + 2)->type, CP_M_NONE);
	cr_expect_eq(item(&v, nints + nuints + 3)->type, CP_M_BOOL);
	cr_expect_eq(item(&v, nints + nuints + 4)->n, 300);
	cr_expect_eq(item(&v, nints + nuints + 5)->n, 300);
	cr_expect_eq(item(&v, nints + nuints + 5)->v.items, item(&v, nints + nuints + 4)->v.items);
	expect_str(item(&v, nints + nuints + 6), "\xc3\xa9");
	cr_expect_eq(item(&v, nints + nuints + 7)->type, CP_M_DICT);
	cr_expect_eq(item(&v, nints + nuints + 8)->type, CP_M_LIST);
	free(buf);
	cp_arena_free(a);
}

Test(marshal, write_errors_are_sticky)
{
	struct cp_mw w;

	cp_mw_init(&w, 1000000); /* not an open descriptor */
	for (int i = 0; i < 100000; i++)
		cp_mw_int(&w, i);
	cr_expect_eq(cp_mw_flush(&w), -EBADF);
	cp_mw_int(&w, 1);
	cr_expect_eq(w.err, -EBADF);
	cp_mw_fini(&w);
}
