/* stacks.c: the stack records (service.h): what every runtime and the sampler share
 * about the stacks contexts run on. Records are made outside signal handlers, by the
 * thread that meets the stack, and never freed (a stack the runtime reuses gets its
 * next context on the same record). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "service.h"

__thread struct pl_stack_tls pl_stls PL_TLS;

static struct pl_stack *all_stacks;
static atomic_ullong next_id = 1u << 30; /* apart from the ucontext adapter's ids */

uint64_t pl_stack_next_id(void)
{
	return atomic_fetch_add(&next_id, 1) + 1;
}

struct pl_stack *pl_stack_new(void)
{
	struct pl_stack *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->next_all = __atomic_load_n(&all_stacks, __ATOMIC_ACQUIRE);
	while (!__atomic_compare_exchange_n(&all_stacks, &s->next_all, s, 1, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
	return s;
}

int pl_stack_owns_ctx(const struct pl_stack *s, const struct coprof_thread *th)
{
	return th && s->ctx && s->ctx_thread == th && s->ctx_prof == pl_prof;
}

/* Whether a function comes from the program's sources rather than a system header (a
 * template of Boost's or the C++ library's, instantiated in the program). */
int pl_stack_own_function(const struct coprof_func_info *info)
{
	return info->file && info->file[0] == '/' &&
	       strncmp(info->file, "/usr/include/", 13) != 0 &&
	       strncmp(info->file, "/usr/lib/", 9) != 0;
}
