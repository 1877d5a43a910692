/* fctx-own-jump.c: Boost.Context fibers made through make_fcontext (the shim's, under
 * coprof) and entered through libboost_context's own jump_fcontext, found past the
 * PLT: what a program's object does that coprof attach has not bound yet. Fiber a is
 * entered through the PLT and leaves through the library's jump; b is then entered
 * through the library's jump (the shim last saw a entered); n goes both ways through
 * the PLT; c is entered through the library's jump (the shim last saw the main
 * context entered). Each prints its letter; each is left suspended for good. Run by
 * tests/native/safety.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *fcontext_t;
typedef struct {
	fcontext_t fctx;
	void *data;
} transfer_t;

/* libboost_context.so's C functions (boost/context/detail/fcontext.hpp) */
fcontext_t make_fcontext(void *sp, size_t size, void (*fn)(transfer_t));
transfer_t jump_fcontext(fcontext_t const to, void *vp);

static transfer_t (*own_jump)(fcontext_t, void *);

#define STACK (64 * 1024)
static char stacks[4][STACK] __attribute__((aligned(16)));

static void a_entry(transfer_t t)
{
	puts("a");
	own_jump(t.fctx, NULL);
	abort(); /* never resumed */
}

static void b_entry(transfer_t t)
{
	puts("b");
	jump_fcontext(t.fctx, NULL);
	abort();
}

static void n_entry(transfer_t t)
{
	puts("n");
	jump_fcontext(t.fctx, NULL);
	abort();
}

static void c_entry(transfer_t t)
{
	puts("c");
	jump_fcontext(t.fctx, NULL);
	abort();
}

static int find_boost(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	if (strstr(info->dlpi_name, "libboost_context")) {
		*(const char **)arg = info->dlpi_name;
		return 1;
	}
	return 0;
}

int main(void)
{
	const char *path = NULL;
	dl_iterate_phdr(find_boost, &path);
	void *lib = path ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
	if (!lib || !(own_jump = (transfer_t(*)(fcontext_t, void *))dlsym(lib, "jump_fcontext"))) {
		fprintf(stderr, "fctx-own-jump: no libboost_context loaded\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	jump_fcontext(make_fcontext(stacks[0] + STACK, STACK, a_entry), NULL);
	own_jump(make_fcontext(stacks[1] + STACK, STACK, b_entry), NULL);
	jump_fcontext(make_fcontext(stacks[2] + STACK, STACK, n_entry), NULL);
	own_jump(make_fcontext(stacks[3] + STACK, STACK, c_entry), NULL);
	puts("done");
	return 0;
}
