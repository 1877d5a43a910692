/* export-pprof.c: `coprof export --format pprof`: a gzipped profile.proto (the format
 * of `go tool pprof`, Pyroscope, Parca, Cloud Profiler) from one or more profiles.
 * Sampled files give their full stacks, traced files what they hold, caller->callee
 * pairs and own times; both labelled by thread and task. Stalls are samples of their
 * own sample types. Runs in the coprof command. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "export-pprof.h"
#include "export-traced.h"
#include "pb.h"

/* profile.proto's field numbers (github.com/google/pprof, proto/profile.proto). */
enum {
	P_SAMPLE_TYPE = 1,
	P_SAMPLE = 2,
	P_MAPPING = 3,
	P_LOCATION = 4,
	P_FUNCTION = 5,
	P_STRING_TABLE = 6,
	P_TIME_NANOS = 9,
	P_DURATION_NANOS = 10,
	P_PERIOD_TYPE = 11,
	P_PERIOD = 12,
	P_COMMENT = 13,
	P_DEFAULT_SAMPLE_TYPE = 14,
	VT_TYPE = 1,
	VT_UNIT = 2,
	S_LOCATION_ID = 1,
	S_VALUE = 2,
	S_LABEL = 3,
	L_KEY = 1,
	L_STR = 2,
	L_NUM = 3,
	L_NUM_UNIT = 4,
	M_ID = 1,
	M_FILENAME = 5,
	M_HAS_FUNCTIONS = 7,
	M_HAS_FILENAMES = 8,
	M_HAS_LINE_NUMBERS = 9,
	LOC_ID = 1,
	LOC_MAPPING_ID = 2,
	LOC_LINE = 4,
	LINE_FUNCTION_ID = 1,
	LINE_LINE = 2,
	F_ID = 1,
	F_NAME = 2,
	F_FILENAME = 4,
	F_START_LINE = 5,
};

/* The profile's string table: index 0 is "", every string is written once. */
struct strtab {
	char **strs;
	uint32_t n, cap;
	uint32_t *slots; /* open addressing: index + 1, 0 empty */
	uint32_t nslots; /* a power of two, at least twice n */
	int err;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int strtab_grow(struct strtab *t)
{
	uint32_t nslots = t->nslots ? t->nslots * 2 : 1024;
	uint32_t *slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n; i++) {
		uint32_t s = hash_str(t->strs[i]) & (nslots - 1);
		while (slots[s])
			s = (s + 1) & (nslots - 1);
		slots[s] = i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = nslots;
	return 0;
}

/* The index of `s` in the table, added if new. On out of memory sets the sticky
 * error and returns 0 (the empty string), so encoding runs on and fails at the end. */
static int64_t str(struct strtab *t, const char *s)
{
	if (!s)
		s = "";
	if (t->err)
		return 0;
	if ((uint64_t)(t->n + 1) * 2 > t->nslots && (t->err = strtab_grow(t)))
		return 0;
	uint32_t slot = hash_str(s) & (t->nslots - 1);
	for (; t->slots[slot]; slot = (slot + 1) & (t->nslots - 1))
		if (!strcmp(t->strs[t->slots[slot] - 1], s))
			return t->slots[slot] - 1;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 1024;
		char **strs = realloc(t->strs, cap * sizeof(*strs));
		if (!strs) {
			t->err = -ENOMEM;
			return 0;
		}
		t->strs = strs;
		t->cap = cap;
	}
	if (!(t->strs[t->n] = strdup(s))) {
		t->err = -ENOMEM;
		return 0;
	}
	t->slots[slot] = ++t->n;
	return t->n - 1;
}

static void strtab_free(struct strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	free(t->slots);
}

/* What one export is building. Functions and locations are the merged table's
 * functions, id = index + 1 (one location per function: the files hold no addresses
 * or call-site lines, only each function's own line). */
struct out {
	struct vw_pb prof; /* the Profile message */
	struct vw_pb msg;  /* scratch for one nested message */
	struct vw_pb sub;  /* scratch for one message nested in that */
	struct strtab strs;
	const struct vw_table *t;
	uint8_t *used;	/* per function: referenced by a sample */
	uint64_t *locs; /* scratch: one sample's location ids */
	uint32_t nlocs;
	uint32_t nvalues; /* 2, or 4 with the stall types */
};

/* A sample's values, in the order of the sample types. */
enum { V_COUNT, V_NS, V_STALLS, V_STALL_NS, NVALUES };

static void value_type(struct out *o, uint32_t field, const char *type, const char *unit)
{
	vw_pb_reset(&o->msg);
	vw_pb_int(&o->msg, VT_TYPE, str(&o->strs, type));
	vw_pb_int(&o->msg, VT_UNIT, str(&o->strs, unit));
	vw_pb_msg(&o->prof, field, &o->msg);
}

/* Appends one label to o->msg (a Sample being built). */
static void label_str(struct out *o, const char *key, const char *val)
{
	vw_pb_reset(&o->sub);
	vw_pb_int(&o->sub, L_KEY, str(&o->strs, key));
	vw_pb_int(&o->sub, L_STR, str(&o->strs, val));
	vw_pb_msg(&o->msg, S_LABEL, &o->sub);
}

/* A number label; `unit` (NULL: none) lets pprof scale and filter it ("25ms:"). */
static void label_num(struct out *o, const char *key, int64_t num, const char *unit)
{
	vw_pb_reset(&o->sub);
	vw_pb_int(&o->sub, L_KEY, str(&o->strs, key));
	vw_pb_int(&o->sub, L_NUM, num);
	if (unit)
		vw_pb_int(&o->sub, L_NUM_UNIT, str(&o->strs, unit));
	vw_pb_msg(&o->msg, S_LABEL, &o->sub);
}

/* Starts a Sample in o->msg with the locations o->locs and the first o->nvalues of
 * `v`; the caller adds labels and then calls end_sample. */
static void begin_sample(struct out *o, const uint64_t v[NVALUES])
{
	vw_pb_reset(&o->msg);
	vw_pb_packed(&o->msg, S_LOCATION_ID, o->locs, o->nlocs);
	vw_pb_packed(&o->msg, S_VALUE, v, o->nvalues);
	for (uint32_t i = 0; i < o->nlocs; i++)
		o->used[o->locs[i] - 1] = 1;
}

static void end_sample(struct out *o)
{
	vw_pb_msg(&o->prof, P_SAMPLE, &o->msg);
}

static const char *thread_name(const struct cp_extras *ex, uint64_t tid)
{
	for (uint32_t i = 0; i < ex->nthreads; i++)
		if (ex->threads[i].tid == tid)
			return ex->threads[i].name;
	return NULL;
}

/* The labels thread (the tid) and thread_name (when the file names the thread). */
static void label_thread(struct out *o, const struct cp_extras *ex, uint64_t tid)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRIu64, tid);
	label_str(o, "thread", buf);
	const char *tn = thread_name(ex, tid);
	if (tn && *tn)
		label_str(o, "thread_name", tn);
}

/* The labels task (its name, or "task ID" for a task without one) and task_id. */
static void label_task(struct out *o, const char *name, uint64_t id)
{
	char buf[48];
	if (name && *name)
		label_str(o, "task", name);
	else {
		snprintf(buf, sizeof(buf), "task %" PRIu64, id);
		label_str(o, "task", buf);
	}
	label_num(o, "task_id", (int64_t)id, NULL);
}

/* The weight of each stack of `p` in ns. Files from before 'stack_ns' only say how
 * many samples each stack had: each function's own time is then split over the
 * stacks it ends, in proportion to their samples, which keeps every function's own
 * time and the total exact. Returns -ENOMEM or the number of stacks estimated. */
static int64_t stack_weights(const struct cp_profile *p, uint64_t *w)
{
	const struct cp_extras *ex = &p->ex;
	int64_t estimated = 0;
	uint64_t *leaf = NULL;
	for (uint32_t i = 0; i < ex->nstacks; i++) {
		const struct cp_stack *s = &ex->stacks[i];
		w[i] = s->weight;
		if (s->weight || !s->count || !s->depth)
			continue;
		if (!leaf && !(leaf = calloc(p->stats.nfuncs + 1, sizeof(*leaf))))
			return -ENOMEM;
		if (!estimated++)
			for (uint32_t j = 0; j < ex->nstacks; j++)
				if (ex->stacks[j].depth &&
				    ex->stacks[j].frames[0] < p->stats.nfuncs)
					leaf[ex->stacks[j].frames[0]] += ex->stacks[j].count;
	}
	for (uint32_t i = 0; estimated && i < ex->nstacks; i++) {
		const struct cp_stack *s = &ex->stacks[i];
		if (s->weight || !s->count || !s->depth || s->frames[0] >= p->stats.nfuncs)
			continue;
		double tt = p->stats.funcs[s->frames[0]].s.tt;
		w[i] = vw_ns(tt * (double)s->count / (double)leaf[s->frames[0]]);
	}
	free(leaf);
	return estimated;
}

/* One Sample per sampled stack of `p`, innermost frame first, with its samples and
 * their ns, labelled thread, thread_name, task, task_id and waiting. */
static int put_stacks(struct out *o, const struct cp_profile *p, const char *path)
{
	const struct cp_extras *ex = &p->ex;
	uint64_t *w = calloc(ex->nstacks + 1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	int64_t est = stack_weights(p, w);
	if (est < 0) {
		free(w);
		return (int)est;
	}
	if (est)
		fprintf(stderr,
			"coprof export: %s has no per-stack times (an older file): each "
			"function's own time is split over its stacks by sample count\n",
			path);
	for (uint32_t i = 0; i < ex->nstacks; i++) {
		const struct cp_stack *s = &ex->stacks[i];
		/* A stack without frames charged no function: report leaves it out. */
		if (!s->count || !s->depth)
			continue;
		o->nlocs = 0;
		for (uint32_t d = 0; d < s->depth; d++) {
			if (s->frames[d] >= p->stats.nfuncs)
				continue;
			int64_t f = vw_table_find(o->t, &p->stats.funcs[s->frames[d]].key);
			if (f >= 0)
				o->locs[o->nlocs++] = (uint64_t)f + 1;
		}
		begin_sample(o, (uint64_t[NVALUES]){s->count, w[i], 0, 0});
		label_thread(o, ex, s->thread);
		if (s->task >= 0 && (uint64_t)s->task < ex->ntasks)
			label_task(o, ex->tasks[s->task].name, ex->tasks[s->task].id);
		else
			label_str(o, "task", "[thread]");
		if (s->waiting)
			label_str(o, "waiting", "true");
		end_sample(o);
	}
	free(w);
	return 0;
}

/* One piece of a traced (or cProfile/yappi) table as a sample: a "caller;callee"
 * pair worth the edge's calls and the callee's own time in them, or the callee alone
 * with the part of its own time and calls no edge accounts for (a root's). A coprof
 * file's pieces are per task, labelled as sampled stacks are; the threads' own part
 * is task "[thread]", with its thread when the file had one. So every function's flat
 * time is its tsub, as in `coprof report`, and -tagfocus=task=... works alike. */
static int put_part(void *arg, const struct vw_part *pt)
{
	struct out *o = arg;
	o->locs[0] = (uint64_t)pt->callee + 1;
	o->nlocs = 1;
	if (pt->caller >= 0)
		o->locs[o->nlocs++] = (uint64_t)pt->caller + 1;
	begin_sample(o, (uint64_t[NVALUES]){pt->nc, pt->ns, 0, 0});
	if (pt->ex->present) {
		if (pt->thread >= 0)
			label_thread(o, pt->ex, (uint64_t)pt->thread);
		if (pt->task)
			label_task(o, pt->task->name, pt->task->id);
		else
			label_str(o, "task", "[thread]");
	}
	end_sample(o);
	return 0;
}

/* One sample per stall (doc/design.md rule 11), on the stall's stack, innermost
 * first: 1 in "stalls", its length in "stall_time", 0 in the other types, so no total
 * of those changes. Labelled thread, thread_name, task, task_id as the other samples,
 * stall "true", stall_length (ns, a number pprof can filter: "50ms:") and, when
 * tasks were ready and waiting behind it, ready_behind: how many (rule 12). */
static void put_stalls(struct out *o, const struct vw_model *m)
{
	for (uint32_t i = 0; i < m->nstalls; i++) {
		const struct cp_stall *s = m->stalls[i].s;
		uint64_t len = vw_ns(s->seconds);
		o->nlocs = 0;
		for (uint32_t d = 0; d < s->depth; d++) {
			int64_t f = vw_table_find(o->t, &s->frames[d]);
			if (f >= 0)
				o->locs[o->nlocs++] = (uint64_t)f + 1;
		}
		begin_sample(o, (uint64_t[NVALUES]){0, 0, 1, len});
		label_thread(o, &m->profiles[m->stalls[i].file]->ex, s->thread);
		label_task(o, s->task, s->task_id);
		label_str(o, "stall", "true");
		label_num(o, "stall_length", len > INT64_MAX ? INT64_MAX : (int64_t)len,
			  "nanoseconds");
		if (s->behind > 0) /* pprof reads a label of 0 as none */
			label_num(o, "ready_behind", s->behind, NULL);
		end_sample(o);
	}
}

/* The Function and Location tables: every function a sample names. Lines are written
 * only where the file has one (native functions without debug info have line 0). The
 * names are final (demangled, Python qualnames): system_name stays empty, which tells
 * pprof not to "simplify" them (it would cut "<lambda>" or "f(int)" as C++). */
static void put_functions(struct out *o)
{
	for (uint32_t i = 0; i < o->t->nfuncs; i++) {
		const struct cp_key *k = &o->t->funcs[i].key;
		if (!o->used[i])
			continue;
		vw_pb_reset(&o->msg);
		vw_pb_uint(&o->msg, F_ID, i + 1);
		vw_pb_int(&o->msg, F_NAME, str(&o->strs, k->name));
		vw_pb_int(&o->msg, F_FILENAME, str(&o->strs, k->file));
		if (k->line)
			vw_pb_int(&o->msg, F_START_LINE, (int64_t)k->line);
		vw_pb_msg(&o->prof, P_FUNCTION, &o->msg);

		vw_pb_reset(&o->sub);
		vw_pb_uint(&o->sub, LINE_FUNCTION_ID, i + 1);
		if (k->line)
			vw_pb_int(&o->sub, LINE_LINE, (int64_t)k->line);
		vw_pb_reset(&o->msg);
		vw_pb_uint(&o->msg, LOC_ID, i + 1);
		vw_pb_uint(&o->msg, LOC_MAPPING_ID, 1);
		vw_pb_msg(&o->msg, LOC_LINE, &o->sub);
		vw_pb_msg(&o->prof, P_LOCATION, &o->msg);
	}
}

static void comment(struct out *o, const char *s)
{
	vw_pb_int(&o->prof, P_COMMENT, str(&o->strs, s));
}

/* gzip (RFC 1952) of `len` bytes at `p`, written to `f`. 0 or -errno. */
static int put_gzip(FILE *f, const unsigned char *p, size_t len)
{
	z_stream z = {0};
	unsigned char buf[1 << 16];
	int zr;
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -ENOMEM;
	z.next_in = (unsigned char *)p;
	do {
		size_t chunk = len > (1u << 30) ? (1u << 30) : len;
		z.avail_in = (uInt)chunk;
		len -= chunk;
		do {
			z.next_out = buf;
			z.avail_out = sizeof(buf);
			zr = deflate(&z, len ? Z_NO_FLUSH : Z_FINISH);
			size_t n = sizeof(buf) - z.avail_out;
			if (zr == Z_STREAM_ERROR || (n && fwrite(buf, 1, n, f) != n)) {
				deflateEnd(&z);
				return zr == Z_STREAM_ERROR ? -EINVAL : -EIO;
			}
		} while (z.avail_out == 0);
	} while (len);
	deflateEnd(&z);
	return zr == Z_STREAM_END ? 0 : -EIO;
}

int vw_export_pprof(FILE *f, const struct vw_model *m)
{
	const struct vw_table *t = &m->funcs;
	uint32_t sampled = 0, maxdepth = 2;
	for (uint32_t i = 0; i < m->nprofiles; i++) {
		const struct cp_extras *ex = &m->profiles[i]->ex;
		sampled += ex->nstacks > 0;
		for (uint32_t j = 0; j < ex->nstacks; j++)
			if (ex->stacks[j].depth > maxdepth)
				maxdepth = ex->stacks[j].depth;
	}
	for (uint32_t i = 0; i < m->nstalls; i++)
		if (m->stalls[i].s->depth > maxdepth)
			maxdepth = m->stalls[i].s->depth;
	/* Stall types only where a file measured stalls, so other profiles keep two. */
	int stalls = m->stall_threshold > 0 || m->nstalls;
	if (sampled && sampled != m->nprofiles) {
		fprintf(stderr, "coprof export: pprof needs the files to be all sampled or all "
				"traced: their samples would not add up (export them apart)\n");
		return -EINVAL;
	}
	struct out o = {.t = t, .nvalues = stalls ? NVALUES : 2};
	o.used = calloc(t->nfuncs + 1, 1);
	o.locs = calloc(maxdepth, sizeof(*o.locs));
	int rc = -ENOMEM;
	if (!o.used || !o.locs)
		goto out;
	str(&o.strs, "");

	const char *clock =
	    !strcmp(m->clock, "cpu") || !strcmp(m->clock, "wall") ? m->clock : "time";
	value_type(&o, P_SAMPLE_TYPE, sampled ? "samples" : "calls", "count");
	value_type(&o, P_SAMPLE_TYPE, clock, "nanoseconds");
	if (stalls) {
		value_type(&o, P_SAMPLE_TYPE, "stalls", "count");
		value_type(&o, P_SAMPLE_TYPE, "stall_time", "nanoseconds");
	}
	/* pprof shows the last type unless told: time, as without stalls */
	vw_pb_int(&o.prof, P_DEFAULT_SAMPLE_TYPE, str(&o.strs, clock));
	rc = 0;
	if (sampled)
		for (uint32_t i = 0; i < m->nprofiles && !rc; i++)
			rc = put_stacks(&o, m->profiles[i], m->paths[i]);
	else {
		fprintf(stderr, "coprof export: a traced profile has caller->callee edges, not "
				"stacks: the pprof file holds caller;callee pairs and own times, "
				"so its cumulative times go one call deep\n");
		rc = vw_traced_parts(m, put_part, &o);
	}
	if (rc)
		goto out;
	put_stalls(&o, m);

	/* One mapping that says the functions are already known, so pprof does not try
	 * to symbolize addresses the file does not have. */
	char cmd[1024];
	vw_model_command(m, cmd, sizeof(cmd));
	vw_pb_reset(&o.msg);
	vw_pb_uint(&o.msg, M_ID, 1);
	vw_pb_int(&o.msg, M_FILENAME, str(&o.strs, *cmd ? strtok(cmd, " ") : "coprof"));
	vw_pb_uint(&o.msg, M_HAS_FUNCTIONS, 1);
	vw_pb_uint(&o.msg, M_HAS_FILENAMES, 1);
	vw_pb_uint(&o.msg, M_HAS_LINE_NUMBERS, 1);
	vw_pb_msg(&o.prof, P_MAPPING, &o.msg);
	put_functions(&o);

	double start = 0, hz = 0;
	for (uint32_t i = 0; i < m->nprofiles; i++) {
		const struct cp_extras *ex = &m->profiles[i]->ex;
		if (ex->present && ex->start > 0 && (!start || ex->start < start))
			start = ex->start;
		if (ex->hz > hz)
			hz = ex->hz;
	}
	if (start > 0)
		vw_pb_int(&o.prof, P_TIME_NANOS, (int64_t)vw_ns(start));
	if (m->duration > 0)
		vw_pb_int(&o.prof, P_DURATION_NANOS, (int64_t)vw_ns(m->duration));
	vw_pb_reset(&o.msg);
	vw_pb_int(&o.msg, VT_TYPE, str(&o.strs, clock));
	vw_pb_int(&o.msg, VT_UNIT, str(&o.strs, "nanoseconds"));
	vw_pb_msg(&o.prof, P_PERIOD_TYPE, &o.msg);
	if (sampled && hz > 0)
		vw_pb_int(&o.prof, P_PERIOD, (int64_t)llround(1e9 / hz));

	char line[1200];
	snprintf(line, sizeof(line), "coprof %s; clock: %s; mode: %s", COPROF_VERSION, m->clock,
		 m->mode);
	comment(&o, line);
	vw_model_command(m, cmd, sizeof(cmd));
	if (*cmd) {
		snprintf(line, sizeof(line), "command: %s", cmd);
		comment(&o, line);
	}
	if (!sampled)
		comment(&o, "traced profile: samples are caller;callee pairs (calls, and the "
			    "callee's own time in them) and each function's remaining own time; "
			    "not full stacks");
	if (stalls) {
		snprintf(line, sizeof(line),
			 "stalls: %" PRIu32 " steps of %.3f ms or more on the %s clock, one "
			 "sample each (types stalls and stall_time, label stall=true) on the "
			 "stack of its longest point",
			 m->nstalls, m->stall_threshold * 1e3, m->clock);
		comment(&o, line);
	}
	for (uint32_t i = 0; i < m->nprofiles; i++)
		for (uint32_t j = 0; j < m->profiles[i]->ex.nnotes; j++)
			comment(&o, m->profiles[i]->ex.notes[j]);

	for (uint32_t i = 0; i < o.strs.n; i++)
		vw_pb_bytes(&o.prof, P_STRING_TABLE, o.strs.strs[i], strlen(o.strs.strs[i]));
	rc = o.prof.err ? o.prof.err : o.msg.err ? o.msg.err : o.sub.err ? o.sub.err : o.strs.err;
	if (!rc)
		rc = put_gzip(f, o.prof.buf, o.prof.len);
out:
	if (rc == -EIO)
		fprintf(stderr, "coprof export: write failed: %s\n", strerror(errno));
	vw_pb_free(&o.prof);
	vw_pb_free(&o.msg);
	vw_pb_free(&o.sub);
	strtab_free(&o.strs);
	free(o.used);
	free(o.locs);
	return rc;
}
