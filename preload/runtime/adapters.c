/* adapters.c: the runtimes of the shim, set up and registered at start, in the order
 * start and stop follow (runtime.h). Runs in the constructor. */
#include "runtime.h"

void pl_adapters_init(const struct pl_lend *lend)
{
	pl_uctx_init(0);
	pl_fctx_init(0);
	pl_stack_init();
	pl_instrument_init();
	pl_python_init(lend);
	pl_sampler_init();
}
