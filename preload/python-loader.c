/* python-loader.c: placeholder until the CPython adapter lands. */
#include "shim.h"

int pl_python_init(void)
{
	return 0;
}
