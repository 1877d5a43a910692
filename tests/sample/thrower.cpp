// thrower.cpp: C++ code a C program loads at run time (tests/sample/throws.c), as CPython
// loads a C++ extension: its exceptions go through whichever _Unwind_RaiseException the
// process's global scope gives libstdc++ when the library is loaded.
#include <stdexcept>

extern "C" long throw_loop(long n)
{
	long caught = 0;
	for (long i = 0; i < n; i++) {
		try {
			throw std::runtime_error("thrown");
		} catch (const std::exception &) {
			caught++;
		}
	}
	return caught;
}
