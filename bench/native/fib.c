/* fib.c: a call-heavy instrumented program for the per-call overhead benchmark:
 * fib(N) makes 2*fib(N+1)-1 calls of fib. usage: fib [N] (default 30). */
#include <stdio.h>
#include <stdlib.h>

static unsigned long fib(int n)
{
	return n < 2 ? (unsigned long)n : fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 30;
	printf("fib(%d) = %lu\n", n, fib(n));
	return 0;
}
