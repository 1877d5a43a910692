/* other-layout.c: an engine of another layout, as far as the CPython adapter can tell:
 * preloaded before the shim, its coprof__inline_layout answers first, with a number no
 * build of engine-inline.h gives (check-adapter-layout.py). */
#include <stdint.h>

__attribute__((visibility("default"))) uint64_t coprof__inline_layout(void);

uint64_t coprof__inline_layout(void)
{
	return 1;
}
