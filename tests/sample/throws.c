/* throws LIB N: loads LIB (thrower.cpp) with dlopen, prints which object defines the
 * _Unwind_RaiseException the process's global scope gives (so which unwinder its C++
 * exceptions take), then throws and catches N exceptions in it. Built twice: plain, and
 * linked with libunwind itself (throws-unw), whose copy the shim then shares. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: throws LIB N\n");
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW);
	long (*loop)(long) = lib ? (long (*)(long))dlsym(lib, "throw_loop") : NULL;
	if (!loop) {
		fprintf(stderr, "throws: %s\n", dlerror());
		return 2;
	}
	void *raise = dlsym(RTLD_DEFAULT, "_Unwind_RaiseException");
	Dl_info di;
	printf("unwinder %s\n", raise && dladdr(raise, &di) ? di.dli_fname : "(not global)");
	long n = atol(argv[2]);
	printf("caught %ld of %ld\n", loop(n), n);
	return 0;
}
