/* engine-await.c: who awaits whom (doc/python.md): each thread's await edges, one per
 * (waiter, awaited, kind), with a count and a wall time, as the Python adapter reports
 * them when a waiting task resumes. A bounded table from the thread's pool; the dumper
 * copies it while the writers are paused (snapshot.c). Runs in the thread concerned,
 * inside an event section; never in a signal handler. */
#define _GNU_SOURCE
#include <string.h>

#include "engine-inline.h"

/* An edge's identity: both tasks' ids and names (a task's id is an address, which a
 * later task may reuse: the name tells them apart, "Task-<n>" being unique), and the
 * kind. Names are compared as records keep them, cut to fit. */
struct await_key {
	uint64_t w, a;
	uint32_t k;
	char wname[sizeof(((struct cp_await_rec *)0)->wname)];
	char aname[sizeof(((struct cp_await_rec *)0)->aname)];
};

static void copy_name(char *to, size_t len, const char *from)
{
	size_t n = 0;
	for (; from && from[n] && n < len - 1; n++)
		to[n] = from[n];
	memset(to + n, 0, len - n);
}

static uint32_t await_hash(const struct await_key *key)
{
	uint64_t x = key->w * 0x9E3779B97F4A7C15ull ^ (key->a + key->k) * 0xC2B2AE3D27D4EB4Full;
	for (const char *s = key->aname; *s; s++)
		x = (x ^ (unsigned char)*s) * 0x100000001B3ull;
	return (uint32_t)(x ^ (x >> 29));
}

/* The slot of edge `key` in t's index: its record's, or the empty one it would go in.
 * The index is never full (twice as many slots as records). */
static uint32_t *await_slot(struct coprof_thread *t, const struct await_key *key, uint32_t hash)
{
	uint32_t mask = 2 * t->cawaits - 1;
	for (uint32_t h = hash & mask;; h = (h + 1) & mask) {
		uint32_t *s = &t->await_slots[h];
		if (!*s)
			return s;
		const struct cp_await_rec *r = &t->awaits[*s - 1];
		if (r->waiter == key->w && r->awaited == key->a && r->kind == key->k &&
		    !memcmp(r->wname, key->wname, sizeof(r->wname)) &&
		    !memcmp(r->aname, key->aname, sizeof(r->aname)))
			return s;
	}
}

/* Indexes records [0, nawaits) again in an emptied index: their keys are distinct, so
 * each takes the first free slot from its hash, with no comparison. */
static void index_all(struct coprof_thread *t)
{
	uint32_t mask = 2 * t->cawaits - 1;
	for (uint32_t i = 0; i < t->nawaits; i++) {
		uint32_t h = t->awaits[i].hash & mask;
		while (t->await_slots[h])
			h = (h + 1) & mask;
		t->await_slots[h] = i + 1;
	}
}
/* The k-th largest of v[0..n) (k < n), v reordered: Hoare's selection, in place. */
static uint64_t kth_largest(uint64_t *v, int64_t n, int64_t k)
{
	int64_t lo = 0, hi = n - 1;
	while (lo < hi) {
		uint64_t pivot = v[lo + (hi - lo) / 2];
		int64_t i = lo, j = hi;
		while (i <= j) {
			while (v[i] > pivot)
				i++;
			while (v[j] < pivot)
				j--;
			if (i <= j) {
				uint64_t x = v[i];
				v[i++] = v[j];
				v[j--] = x;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

/* A full table keeps its longer half: a million tasks' edges stay bounded, and the
 * long waits (a request's root, its critical path) outlive the many short ones made
 * first. The waits of the edges let go are counted as dropped. The index's slots,
 * rebuilt after, serve as scratch (as many bytes as the records' times). */
static void await_evict(struct coprof_thread *t)
{
	uint32_t n = t->nawaits, keep = n / 2;
	uint64_t *ns = (uint64_t *)(void *)t->await_slots;
	for (uint32_t i = 0; i < n; i++)
		ns[i] = t->awaits[i].ns;
	uint64_t thr = kth_largest(ns, n, keep - 1);
	uint32_t above = 0, kept = 0;
	for (uint32_t i = 0; i < n; i++)
		above += t->awaits[i].ns > thr;
	uint32_t ties = keep - above; /* records at the threshold that stay */
	for (uint32_t i = 0; i < n; i++) {
		const struct cp_await_rec *r = &t->awaits[i];
		if (r->ns > thr || (r->ns == thr && ties && ties--))
			t->awaits[kept++] = *r;
		else
			t->awaits_dropped += r->count;
	}
	t->nawaits = kept;
	memset(t->await_slots, 0, 2 * (size_t)t->cawaits * sizeof(*t->await_slots));
	index_all(t);
}

/* Room for one more record: the table doubles (from 64) up to CP_AWAITS_KEPT, where
 * it lets its shorter half go. 0, or -1 when the pool has no more memory. */
static int await_grow(struct coprof_thread *t)
{
	if (t->nawaits < t->cawaits)
		return 0;
	uint32_t cap = t->cawaits ? t->cawaits * 2 : 64;
	if (cap > CP_AWAITS_KEPT) {
		await_evict(t);
		return 0;
	}
	struct cp_await_rec *recs = cp_pool_alloc(&t->pool, cap * sizeof(*recs));
	uint32_t *slots = recs ? cp_pool_alloc(&t->pool, 2 * cap * sizeof(*slots)) : NULL;
	if (!slots) {
		if (recs)
			cp_pool_free(&t->pool, recs, cap * sizeof(*recs));
		return -1;
	}
	if (t->nawaits)
		memcpy(recs, t->awaits, t->nawaits * sizeof(*recs));
	if (t->cawaits) {
		cp_pool_free(&t->pool, t->awaits, t->cawaits * sizeof(*recs));
		cp_pool_free(&t->pool, t->await_slots, 2 * t->cawaits * sizeof(*slots));
	}
	t->awaits = recs;
	t->await_slots = slots;
	t->cawaits = cap;
	index_all(t);
	return 0;
}

void coprof_await_add(struct coprof_thread *t, const struct coprof_ctx *waiter, uint64_t awaited_id,
		      const char *awaited, enum coprof_await_kind kind, uint64_t ns)
{
	if (!t || !waiter || (unsigned)kind >= COPROF_AWAIT_KINDS)
		return;
	uint32_t st = cp_section_open(t);
	if (waiter->t != t || !(st == t->seen || cp_thread_begin(t, st)))
		goto out;
	struct await_key key = {.w = waiter->id, .a = awaited_id, .k = kind};
	copy_name(key.wname, sizeof(key.wname), waiter->name);
	copy_name(key.aname, sizeof(key.aname), awaited);
	uint32_t hash = await_hash(&key);
	uint32_t *s = t->cawaits ? await_slot(t, &key, hash) : NULL;
	if (!s || !*s) {
		if (await_grow(t) != 0) {
			t->awaits_dropped++;
			goto out;
		}
		s = await_slot(t, &key, hash);
		struct cp_await_rec *r = &t->awaits[t->nawaits++];
		r->waiter = key.w;
		r->awaited = key.a;
		r->kind = key.k;
		r->hash = hash;
		r->count = r->ns = 0;
		memcpy(r->wname, key.wname, sizeof(r->wname));
		memcpy(r->aname, key.aname, sizeof(r->aname));
		*s = t->nawaits;
	}
	struct cp_await_rec *r = &t->awaits[*s - 1];
	r->count++;
	r->ns += ns;
out:
	cp_section_close(t);
}
