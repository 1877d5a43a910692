/* gen-profile: writes the sample profile (sample-profile.c) as OUT.pstat through
 * cp_profile_write, and OUT.json describing what a reader must find in it.
 * usage: gen-profile OUT */
#include <stdio.h>
#include <string.h>

#include "sample-profile.h"

int main(int argc, char **argv)
{
	char path[4096];
	struct cp_profile *p;
	FILE *f;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: gen-profile OUT\n");
		return 2;
	}
	if ((r = sample_profile(&p)) < 0) {
		fprintf(stderr, "gen-profile: %s\n", strerror(-r));
		return 1;
	}
	snprintf(path, sizeof(path), "%s.pstat", argv[1]);
	if ((r = cp_profile_write(p, path)) < 0) {
		fprintf(stderr, "gen-profile: %s: %s\n", path, strerror(-r));
		return 1;
	}
	snprintf(path, sizeof(path), "%s.json", argv[1]);
	f = fopen(path, "w");
	if (!f || sample_profile_json(p, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "gen-profile: %s: cannot write\n", path);
		return 1;
	}
	cp_profile_free(p);
	return 0;
}
