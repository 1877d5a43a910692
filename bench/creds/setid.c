/* setid.c: what a credential call costs under the shim (bench/RESULTS.md, "Processes
 * that drop privileges"). usage: setid N setgid|seteuid, as root.
 *
 * setgid: calls setgid(0) N times (root's groups do not matter to its file access, so
 * the shim starts no keeper). seteuid: N pairs of seteuid(65534) and seteuid(0), as a
 * server acting for a user does around each request: with COPROF_OUT in a folder only
 * root may write, the first of each pair starts a coprof-keeper and the second lets it
 * go. Prints the mean time per call (per pair for seteuid). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int n = atoi(argv[1]);
	int pairs = strcmp(argv[2], "seteuid") == 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++)
		if (pairs ? seteuid(65534) || seteuid(0) : setgid(0))
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	printf("%s: %.1f us per %s\n", argv[2], ns / n / 1e3, pairs ? "pair" : "call");
	return 0;
}
