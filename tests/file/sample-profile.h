/* sample-profile.h: a profile built through the file layer's API, holding what files
 * must carry faithfully (non-ASCII names, counts above 2^31, zero and NaN times,
 * recursion, tasks, threads, stacks), and its JSON description for Python checks. */
#ifndef SAMPLE_PROFILE_H
#define SAMPLE_PROFILE_H

#include <stdio.h>

#include "profile.h"

/* Builds the sample profile. 0 or -ENOMEM. */
int sample_profile(struct cp_profile **out);

/* Writes what a reader must find in the file written from `p`, as JSON: the same
 * data with non-finite times as 0.0 (the writer's rule). 0 or -errno. */
int sample_profile_json(const struct cp_profile *p, FILE *f);

#endif
