/* test-ring.c: a sampled thread's ring (preload/sampler/sampler.h), which keeps each
 * record at its own depth: records come out whole and in order across the ring's end
 * and its byte counts' wrap, a full ring refuses a record and spoils none, and a
 * shallow stack takes a few hundred bytes, not a deepest one's. The producer and the
 * consumer take turns here, as the tick handler and the folding thread would. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "sampler/sampler.h"

static struct pl_sthread *new_thread(uint32_t at)
{
	struct pl_sthread *st = calloc(1, sizeof(*st));
	cr_assert(st);
	atomic_store(&st->head, at);
	atomic_store(&st->tail, at);
	return st;
}

/* Writes record `seq` of `depth` frames; 0 when the ring had no room. */
static int put(struct pl_sthread *st, uint64_t seq, uint32_t depth)
{
	struct pl_rec *rec = pl_ring_reserve(st);
	if (!rec)
		return 0;
	cr_assert_eq((uintptr_t)rec % _Alignof(struct pl_rec), 0);
	rec->kind = PL_REC_SAMPLE;
	rec->weight = seq;
	rec->depth = depth;
	for (uint32_t i = 0; i < depth; i++)
		rec->pcs[i] = seq * 1000 + i;
	pl_ring_publish(st, rec);
	return 1;
}

/* Reads every record published, checking each against the sequence; returns how many. */
static uint64_t take(struct pl_sthread *st, uint64_t *seq, uint32_t (*depth_of)(uint64_t))
{
	uint32_t t = atomic_load(&st->tail), h = atomic_load(&st->head);
	uint64_t n = 0;
	for (uint32_t next; t != h; t = next, n++, (*seq)++) {
		struct pl_rec *rec = pl_ring_at(st, &t);
		next = t + pl_rec_size(rec);
		cr_assert_eq(rec->weight, *seq, "record %llu read as %llu", (unsigned long long)*seq,
			     (unsigned long long)rec->weight);
		cr_assert_eq(rec->depth, depth_of(*seq));
		for (uint32_t i = 0; i < rec->depth; i++)
			cr_assert_eq(rec->pcs[i], *seq * 1000 + i);
	}
	atomic_store(&st->tail, t);
	return n;
}

static uint32_t varied(uint64_t seq)
{
	return (uint32_t)(seq * 7919 % (PL_SAMPLE_DEPTH + PL_SAMPLE_SKIP + 1));
}

static uint32_t dozen(uint64_t seq)
{
	(void)seq;
	return 12;
}

/* Through many turns of the ring, with the byte counts wrapping past 2^32 on the way. */
static void round_trip(uint32_t start)
{
	struct pl_sthread *st = new_thread(start);
	uint64_t wrote = 0, read = 0;
	while (wrote < 20000) {
		int burst = 1 + (int)(wrote % 37);
		for (int i = 0; i < burst && put(st, wrote, varied(wrote)); i++)
			wrote++;
		take(st, &read, varied);
	}
	cr_assert_eq(read, wrote);
	free(st);
}

Test(ring, records_come_out_whole_and_in_order)
{
	round_trip(0);
}

Test(ring, byte_counts_wrap_past_two_to_the_32)
{
	round_trip((uint32_t)0 - 3 * PL_RING_BYTES / 2);
}

Test(ring, a_full_ring_refuses_and_keeps_what_it_holds)
{
	struct pl_sthread *st = new_thread(8 * 12345);
	uint64_t wrote = 0, read = 0;
	while (put(st, wrote, varied(wrote)))
		wrote++;
	cr_assert_gt(wrote, 0);
	cr_assert_eq(put(st, wrote, 0), 0, "a full ring took a record");
	uint32_t used = atomic_load(&st->head) - atomic_load(&st->tail);
	cr_assert_leq(used, PL_RING_BYTES);
	cr_assert_gt(used + sizeof(struct pl_rec), PL_RING_BYTES, "refused with %u bytes used", used);
	cr_assert_eq(take(st, &read, varied), wrote);
	cr_assert(put(st, wrote, varied(wrote)), "an emptied ring refused a record");
	free(st);
}

Test(ring, shallow_stacks_take_their_own_size)
{
	struct pl_sthread *st = new_thread(0);
	uint64_t wrote = 0, read = 0;
	while (put(st, wrote, dozen(wrote)))
		wrote++;
	/* a dozen frames: 168 bytes a record, not the deepest stack's 1,160 */
	cr_assert_geq(wrote, PL_RING_BYTES / (offsetof(struct pl_rec, pcs) + 12 * sizeof(uintptr_t)) - 8,
		      "%llu records of 12 frames", (unsigned long long)wrote);
	cr_assert_eq(take(st, &read, dozen), wrote);
	free(st);
}
