/* test-config.c: the COPROF_* environment parser (preload/state/config.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "python/adapter.h"
#include "state/state.h"

static const char *const *vars; /* NAME, VALUE, NAME, VALUE, ..., NULL */

static const char *get(const char *name)
{
	for (const char *const *v = vars; v && v[0]; v += 2)
		if (!strcmp(v[0], name))
			return v[1];
	return NULL;
}

static int parse(struct pl_config *cfg, char *err, const char *const *v)
{
	vars = v;
	return pl_config_parse(cfg, get, err, 256);
}

Test(config, defaults)
{
	struct pl_config cfg;
	char err[256];
	const char *const none[] = {NULL};
	cr_assert_eq(parse(&cfg, err, none), 0);
	cr_expect_eq(cfg.clock, COPROF_CLOCK_CPU);
	cr_expect_eq(cfg.mode, COPROF_MODE_TRACE);
	cr_expect_eq(cfg.signo, SIGUSR2);
	cr_expect_eq(cfg.start, 1);
	cr_expect_eq(cfg.hz, 99);
	cr_expect_eq(cfg.builtins, 0);
	cr_expect_eq(cfg.py_hook, PL_PY_HOOK_AUTO);
	cr_expect_str_eq(cfg.out, "coprof-%p.pstat");
}

Test(config, every_variable)
{
	struct pl_config cfg;
	char err[256];
	const char *const v[] = {"COPROF_OUT",
				 "/tmp/x.%p.%n.pstat",
				 "COPROF_CLOCK",
				 "wall",
				 "COPROF_MODE",
				 "sample",
				 "COPROF_SIGNAL",
				 "SIGUSR1",
				 "COPROF_START",
				 "0",
				 "COPROF_HZ",
				 "250",
				 "COPROF_BUILTINS",
				 "1",
				 "COPROF_PY_HOOK",
				 "monitoring",
				 NULL};
	cr_assert_eq(parse(&cfg, err, v), 0, "%s", err);
	cr_expect_str_eq(cfg.out, "/tmp/x.%p.%n.pstat");
	cr_expect_eq(cfg.clock, COPROF_CLOCK_WALL);
	cr_expect_eq(cfg.mode, COPROF_MODE_SAMPLE);
	cr_expect_eq(cfg.signo, SIGUSR1);
	cr_expect_eq(cfg.start, 0);
	cr_expect_eq(cfg.hz, 250);
	cr_expect_eq(cfg.builtins, 1);
	cr_expect_eq(cfg.py_hook, PL_PY_HOOK_MONITORING);
}

Test(config, py_hook_evalframe)
{
	struct pl_config cfg;
	char err[256];
	const char *v[] = {"COPROF_PY_HOOK", "evalframe", NULL};
	cr_assert_eq(parse(&cfg, err, v), 0, "%s", err);
	cr_expect_eq(cfg.py_hook, PL_PY_HOOK_EVALFRAME);
}

Test(config, signal_spellings)
{
	cr_expect_eq(pl_parse_signal("USR2"), SIGUSR2);
	cr_expect_eq(pl_parse_signal("sigusr1"), SIGUSR1);
	cr_expect_eq(pl_parse_signal("12"), 12);
	cr_expect_eq(pl_parse_signal("RTMIN+2"), SIGRTMIN + 2);
	cr_expect_eq(pl_parse_signal("SIGRTMAX-1"), SIGRTMAX - 1);
	cr_expect_eq(pl_parse_signal("none"), 0);
	cr_expect_eq(pl_parse_signal("0"), 0);
	cr_expect_lt(pl_parse_signal("KILL"), 0);
	cr_expect_lt(pl_parse_signal("SEGV"), 0);
	cr_expect_lt(pl_parse_signal("USR3"), 0);
	cr_expect_lt(pl_parse_signal("RTMIN+999"), 0);
	cr_expect_lt(pl_parse_signal("-1"), 0);
	cr_expect_lt(pl_parse_signal(""), 0);
}

Test(config, signals_the_host_relies_on_are_refused)
{
	static const char *const refused[] = {"INT",  "PIPE",	"CHLD",	   "ALRM", "SEGV", "BUS",
					      "FPE",  "ILL",	"TERM",	   "HUP",  "QUIT", "WINCH",
					      "CONT", "TSTP",	"TTIN",	   "URG",  "PROF", "2",
					      "17",   "SIGINT", "sigchld", "32",   "33"};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		cr_expect_lt(pl_parse_signal(refused[i]), 0, "%s", refused[i]);
	cr_expect_eq(pl_parse_signal("10"), SIGUSR1);
	cr_expect_eq(pl_parse_signal("RTMIN"), SIGRTMIN);
	cr_expect_eq(pl_parse_signal("RTMAX"), SIGRTMAX);
}

Test(config, booleans_take_y_and_01)
{
	static const char *const yes[] = {"1", "01", "y", "Y", "yes", "ON", "true"};
	static const char *const no[] = {"0", "00", "n", "N", "no", "off", "FALSE"};
	struct pl_config cfg;
	char err[256];
	for (size_t i = 0; i < 7; i++) {
		const char *v[] = {"COPROF_START", no[i], "COPROF_BUILTINS", yes[i], NULL};
		cr_assert_eq(parse(&cfg, err, v), 0, "%s", err);
		cr_expect_eq(cfg.start, 0, "%s", no[i]);
		cr_expect_eq(cfg.builtins, 1, "%s", yes[i]);
	}
	const char *bad[] = {"COPROF_START", "2", NULL};
	cr_expect_lt(parse(&cfg, err, bad), 0);
}

Test(config, nothing_recordable_is_refused)
{
	struct pl_config cfg;
	char err[256];
	const char *v[] = {"COPROF_START", "0", "COPROF_SIGNAL", "none", NULL};
	cr_expect_lt(parse(&cfg, err, v), 0);
	cr_expect(strstr(err, "nothing could ever be recorded") != NULL, "%s", err);
}

Test(toggle_state, round_trip_and_rejects)
{
	struct pl_toggle_state st = {
	    .signo = 12, .run = PL_RUN_ON, .forked = 1, .seq = 1300, .dumps = 1679617};
	char name[16];
	pl_toggle_state_format(&st, name);
	cr_expect_eq(strlen(name), 15);
	struct pl_toggle_state got;
	cr_assert_eq(pl_toggle_state_parse(name, &got), 0, "%s", name);
	cr_expect_eq(got.signo, 12);
	cr_expect_eq(got.run, PL_RUN_ON);
	cr_expect_eq(got.forked, 1);
	cr_expect_eq(got.seq, 1300 % PL_TS_SEQ_MOD);
	cr_expect_eq(got.dumps, 1679617 % PL_TS_DUMPS_MOD);
	char nl[17];
	snprintf(nl, sizeof(nl), "%s\n", name);
	cr_expect_eq(pl_toggle_state_parse(nl, &got), 0);
	static const char *const bad[] = {"resp",
					  "",
					  "coprof12R000000x",
					  "coprof12R00000",
					  "coprofx2R000000",
					  "coprof12Q000000",
					  "coprof12R00000!",
					  "notcop12R000000"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_lt(pl_toggle_state_parse(bad[i], &got), 0, "%s", bad[i]);
}

Test(config, bad_values_say_which_variable)
{
	static const char *const bad[][2] = {
	    {"COPROF_CLOCK", "cycles"},	  {"COPROF_MODE", "trac"},
	    {"COPROF_SIGNAL", "KILL"},	  {"COPROF_START", "maybe"},
	    {"COPROF_HZ", "0"},		  {"COPROF_HZ", "12x"},
	    {"COPROF_HZ", "-5"},	  {"COPROF_OUT", "a%qb"},
	    {"COPROF_OUT", ""},		  {"COPROF_OUT", "/tmp/"},
	    {"COPROF_BUILTINS", "2"},	  {"COPROF_PY_HOOK", "setprofile"},
	    {"COPROF_INTERVAL", "0"},	  {"COPROF_INTERVAL", "0.001"},
	    {"COPROF_INTERVAL", "-1"},	  {"COPROF_INTERVAL", "1e3"},
	    {"COPROF_INTERVAL", "nan"},	  {"COPROF_INTERVAL", ""},
	    {"COPROF_INTERVAL", "."},	  {"COPROF_INTERVAL", "1s"},
	    {"COPROF_INTERVAL", "86401"}, {"COPROF_INTERVAL", "1,5"},
	    {"COPROF_KEEP", "0"},	  {"COPROF_KEEP", "-2"},
	    {"COPROF_KEEP", "3 "},	  {"COPROF_STALL_MS", "0"},
	    {"COPROF_STALL_MS", "-5"},	  {"COPROF_STALL_MS", "20ms"},
	    {"COPROF_STALL_MS", ""},	  {"COPROF_STALL_MS", "3600001"},
	    {"COPROF_STALL_MS", "0.0000001"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pl_config cfg;
		char err[256];
		const char *const v[] = {bad[i][0], bad[i][1], NULL};
		cr_expect_eq(parse(&cfg, err, v), -EINVAL, "%s=%s", bad[i][0], bad[i][1]);
		cr_expect(strstr(err, bad[i][0]) != NULL, "message names the variable: %s", err);
		cr_expect(strchr(err, '\n') == NULL, "one line: %s", err);
	}
}

Test(config, out_path_template)
{
	char buf[256];
	cr_assert_eq(pl_out_path("/tmp/p.%p.%n.pstat", 42, 3, 0, buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, "/tmp/p.42.3.pstat");
	cr_assert_eq(pl_out_path("a%%b.pstat", 42, 1, 0, buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, "a%b.pstat");
	/* no %n: the first dump takes the name as it is, later ones get a number */
	cr_assert_eq(pl_out_path("out.pstat", 42, 1, 0, buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, "out.pstat");
	cr_assert_eq(pl_out_path("out.pstat", 42, 2, 0, buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, "out.2.pstat");
	cr_assert_eq(pl_out_path("dir.d/out", 42, 2, 0, buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, "dir.d/out.2");
	/* a forked child never writes its parent's file */
	cr_assert_eq(pl_out_path("out.pstat", 77, 1, 1, buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, "out.77.pstat");
	cr_assert_eq(pl_out_path("out.%p.pstat", 77, 1, 1, buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, "out.77.pstat");
	cr_expect_eq(pl_out_path("a-long-name-%p", 1234567, 1, 0, buf, 10), -ENAMETOOLONG);
}

Test(config, out_path_problems_say_what_they_are)
{
	struct pl_config cfg;
	char err[256];
	const char *const dir[] = {"COPROF_OUT", "out/", NULL};
	cr_assert_eq(parse(&cfg, err, dir), -EINVAL);
	cr_expect(strstr(err, "directory") != NULL, "%s", err);
	/* a template too long says so, whatever it holds (the value is not quoted whole) */
	static char longer[PATH_MAX + 8];
	memset(longer, 'a', sizeof(longer) - 1);
	const char *const too_long[] = {"COPROF_OUT", longer, NULL};
	cr_assert_eq(parse(&cfg, err, too_long), -EINVAL);
	cr_expect(strstr(err, "COPROF_OUT is too long") != NULL, "%s", err);
	/* the longest accepted one is accepted */
	longer[PATH_MAX - 33] = 0;
	cr_expect_eq(parse(&cfg, err, too_long), 0, "%s", err);
}

Test(config, message_stays_one_line)
{
	struct pl_config cfg;
	char err[256];
	const char *const v[] = {"COPROF_CLOCK", "cpu\nwall", NULL};
	cr_assert_eq(parse(&cfg, err, v), -EINVAL);
	cr_expect(strchr(err, '\n') == NULL, "%s", err);
	cr_expect(strstr(err, "cpu?wall") != NULL, "%s", err);
}

Test(config, stall_threshold)
{
	static const struct {
		const char *v;
		uint64_t ns;
	} good[] = {{"20", 20000000u}, {"0.5", 500000u}, {".001", 1000u}, {"3600000", 3600000000000u}};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct pl_config cfg;
		char err[256];
		const char *const v[] = {"COPROF_STALL_MS", good[i].v, NULL};
		cr_assert_eq(parse(&cfg, err, v), 0, "%s: %s", good[i].v, err);
		cr_expect_eq(cfg.stall_ns, good[i].ns, "%s gave %llu", good[i].v,
			     (unsigned long long)cfg.stall_ns);
		cr_expect_eq(pl_config_options(&cfg).stall_ns, good[i].ns);
	}
	struct pl_config cfg;
	char err[256];
	const char *const none[] = {NULL};
	cr_assert_eq(parse(&cfg, err, none), 0);
	cr_expect_eq(pl_config_options(&cfg).stall_ns, 0, "unset: the engine's 20 ms");
}

Test(config, interval_and_keep)
{
	static const struct {
		const char *v;
		uint64_t ns;
	} good[] = {{"1", 1000000000u},		  {"0.25", 250000000u}, {"2.5", 2500000000u},
		    {".5", 500000000u},		  {"0.01", 10000000u},	{"86400", 86400000000000u},
		    {"1.0000000009", 1000000000u}};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct pl_config cfg;
		char err[256];
		const char *const v[] = {"COPROF_INTERVAL", good[i].v, "COPROF_KEEP", "7", NULL};
		cr_assert_eq(parse(&cfg, err, v), 0, "%s: %s", good[i].v, err);
		cr_expect_eq(cfg.interval_ns, good[i].ns, "%s gave %llu", good[i].v,
			     (unsigned long long)cfg.interval_ns);
		cr_expect_eq(cfg.keep, 7);
	}
	struct pl_config cfg;
	char err[256];
	const char *const none[] = {NULL};
	cr_assert_eq(parse(&cfg, err, none), 0);
	cr_expect_eq(cfg.interval_ns, 0);
	cr_expect_eq(cfg.keep, 0);
}
