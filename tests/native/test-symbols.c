/* test-symbols.c: the symbolizer (preload/service/symbols.c) on this test program (PIE), on a
 * generated shared library of 10,000 functions with DWARF, and on libc. */
#include <criterion/criterion.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/service.h"

#ifndef __has_feature
#define __has_feature(x) 0
#endif

typedef int (*gen_fn_t)(int);
extern const gen_fn_t gen_funcs[];
extern const int gen_nfuncs;

static const unsigned local_line = __LINE__ + 1;
static int local_function(int x)
{
	return x + 1;
}

#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define LOOKUP_LIMIT 2.0 /* s: AddressSanitizer slows libdw down */
#else
#define LOOKUP_LIMIT 0.5 /* s */
#endif

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(symbols, resolves_executable_function_with_file_and_line)
{
	struct pl_symbols *s;
	struct coprof_func_info fi;
	cr_assert_eq(pl_symbols_new(&s), 0);
	cr_assert_eq(pl_symbols_lookup(s, (uintptr_t)local_function, &fi), 0);
	cr_expect_str_eq(fi.name, "local_function");
	cr_expect_eq(fi.line, local_line);
	cr_expect(strstr(fi.file, "tests/native/test-symbols.c") != NULL, "file %s", fi.file);
	cr_expect(fi.file[0] == '/' && !strstr(fi.file, "/../"), "absolute, folded: %s", fi.file);
	/* an address inside the function resolves to it too */
	struct coprof_func_info in;
	cr_assert_eq(pl_symbols_lookup(s, (uintptr_t)local_function + 3, &in), 0);
	cr_expect_str_eq(in.name, "local_function");
	cr_expect_eq(local_function(1), 2);
	pl_symbols_free(s);
}

Test(symbols, ten_thousand_functions_well_under_a_second)
{
	struct pl_symbols *s;
	cr_assert_eq(pl_symbols_new(&s), 0);
	cr_assert_eq(gen_nfuncs, 10000);
	double t0 = now();
	for (int i = 0; i < gen_nfuncs; i++) {
		struct coprof_func_info fi;
		char want[32];
		cr_assert_eq(pl_symbols_lookup(s, (uintptr_t)gen_funcs[i], &fi), 0);
		snprintf(want, sizeof(want), "gen_fn_%d", i);
		cr_assert_str_eq(fi.name, want);
		cr_assert_eq(fi.line, (unsigned)i + 4, "%s at line %u", fi.name, fi.line);
		cr_assert(strstr(fi.file, "funcs10k.c") != NULL, "file %s", fi.file);
		cr_assert_eq(pl_symbols_lookup(s, (uintptr_t)gen_funcs[i] + 2, &fi), 0);
		cr_assert_str_eq(fi.name, want);
	}
	double first = now() - t0;
	t0 = now();
	for (int i = 0; i < gen_nfuncs; i++) {
		struct coprof_func_info fi;
		cr_assert_eq(pl_symbols_lookup(s, (uintptr_t)gen_funcs[i], &fi), 0);
	}
	double cached = now() - t0;
	cr_expect_lt(first, LOOKUP_LIMIT, "20,000 lookups took %.3f s", first);
	cr_expect_lt(cached, first, "cached %.4f s, first %.4f s", cached, first);
	pl_symbols_free(s);
}

/* With libc's debug info installed the file is its source; without, the module. */
Test(symbols, shared_library_function)
{
	struct pl_symbols *s;
	struct coprof_func_info fi;
	cr_assert_eq(pl_symbols_new(&s), 0);
	/* a libc function no sanitizer intercepts */
	cr_assert_eq(pl_symbols_lookup(s, (uintptr_t)gnu_get_libc_version, &fi), 0);
	cr_expect(strstr(fi.name, "gnu_get_libc_version") != NULL, "name %s", fi.name);
	if (fi.line == 0)
		cr_expect(strstr(fi.file, "libc") != NULL, "file %s", fi.file);
	else
		cr_expect(strstr(fi.file, "version.c") != NULL, "file %s", fi.file);
	pl_symbols_free(s);
}

Test(symbols, heap_address_is_unknown)
{
	struct pl_symbols *s;
	struct coprof_func_info fi;
	cr_assert_eq(pl_symbols_new(&s), 0);
	void *p = malloc(64);
	cr_expect_eq(pl_symbols_lookup(s, (uintptr_t)p, &fi), -ENOENT);
	cr_expect_eq(pl_symbols_resolve(s, 0, &fi), -ENOENT);
	free(p);
	pl_symbols_free(s);
}
