/* fuzz-env.c: libFuzzer target for the COPROF_* environment parser and the output
 * path template (preload/state/config.c). The input is split at NUL bytes into the values
 * of COPROF_OUT, COPROF_CLOCK, COPROF_MODE, COPROF_SIGNAL, COPROF_START, COPROF_HZ,
 * COPROF_BUILTINS, COPROF_PY_HOOK; a missing piece leaves its variable unset. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "state/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *names[] = {"COPROF_OUT",   "COPROF_CLOCK", "COPROF_MODE",	 "COPROF_SIGNAL",
			      "COPROF_START", "COPROF_HZ",    "COPROF_BUILTINS", "COPROF_PY_HOOK"};
static const char *values[8];

static const char *get(const char *name)
{
	for (int i = 0; i < 8; i++)
		if (!strcmp(name, names[i]))
			return values[i];
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	char *p = buf;
	for (int i = 0; i < 8; i++) {
		values[i] = p <= buf + size && *p != '\x01' ? p : NULL;
		p += p <= buf + size ? strlen(p) + 1 : 0;
	}
	struct pl_config cfg;
	char err[256], path[PATH_MAX];
	if (pl_config_parse(&cfg, get, err, sizeof(err)) == 0)
		pl_out_path(cfg.out, 12345, 7, size & 1, path, sizeof(path));
	else if (!memchr(err, 0, sizeof(err)) || strchr(err, '\n'))
		abort(); /* the message must be one line */
	pl_parse_signal(buf);
	struct pl_toggle_state st;
	char name[16];
	if (pl_toggle_state_parse(buf, &st) == 0) { /* what parses formats back the same */
		pl_toggle_state_format(&st, name);
		if (strncmp(name, buf, 15) != 0)
			abort();
	}
	free(buf);
	return 0;
}
