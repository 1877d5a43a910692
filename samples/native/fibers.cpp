// fibers.cpp: Boost.Context fibers (boost::context::fiber) in a pipeline, built with
// -finstrument-functions: a producer fiber makes records, a checker fiber validates
// them, and main moves each record from one to the other. coprof follows the fibers
// through libboost_context.so's jump_fcontext/ontop_fcontext (runtime "fcontext").
//
// usage: fibers [RECORDS]   (default 20000)
#include <boost/context/fiber.hpp>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace ctx = boost::context;

struct record {
	unsigned long id;
	unsigned char payload[256];
	unsigned sum;
};

static record slot; // the record in transit between the two fibers
static long n_records;

static void fill_payload(record &r)
{
	unsigned long x = r.id * 2654435761ul + 1;
	for (unsigned char &b : r.payload) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b = (unsigned char)x;
	}
}

static unsigned checksum(const record &r)
{
	unsigned s = 0;
	for (int round = 0; round < 8; round++)
		for (unsigned char b : r.payload)
			s = s * 31 + b + (unsigned)round;
	return s;
}

static ctx::fiber produce(ctx::fiber &&main_fiber)
{
	for (long i = 0; i < n_records; i++) {
		slot.id = (unsigned long)i;
		fill_payload(slot);
		slot.sum = 0;
		main_fiber = std::move(main_fiber).resume(); // hand the record over
	}
	return std::move(main_fiber);
}

static unsigned long checked;

static ctx::fiber check_records(ctx::fiber &&main_fiber)
{
	for (;;) {
		slot.sum = checksum(slot);
		checked++;
		main_fiber = std::move(main_fiber).resume(); // wait for the next one
	}
}

int main(int argc, char **argv)
{
	n_records = argc > 1 ? std::atol(argv[1]) : 20000;
	ctx::fiber producer{produce};
	ctx::fiber checker{check_records};
	unsigned long total = 0;
	for (producer = std::move(producer).resume(); producer;
	     producer = std::move(producer).resume()) {
		checker = std::move(checker).resume();
		total += slot.sum;
	}
	std::printf("fibers: %lu records checked, sum %lu\n", checked, total);
	return 0;
}
