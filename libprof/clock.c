/* clock.c: chooses a clock implementation per thread (see clock.h). */
#include "clock.h"

void cp_clock_init(struct cp_clock *c, enum coprof_clock kind)
{
	c->impl = kind == COPROF_CLOCK_CPU ? CP_CLOCK_CPUTIME : CP_CLOCK_MONOTONIC;
	c->last = 0;
}

void cp_clock_fini(struct cp_clock *c)
{
	(void)c;
}

const char *cp_clock_name(const struct cp_clock *c)
{
	return c->impl == CP_CLOCK_CPUTIME ? "thread-cputime" : "monotonic";
}
