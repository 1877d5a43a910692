/* sampler.c: placeholder until sample mode lands. */
#include "shim.h"

int pl_sampler_init(void)
{
	return 0;
}
