// fibers.cpp: a program started without coprof that makes Boost.Context fibers
// (boost::context::fiber, through libboost_context.so's make_fcontext and
// jump_fcontext) for ever, for tests/attach/attach.py's cases fibers and old_fibers:
// two fibers made at the start live for ever, each spinning in old_spin and yielding
// back once a round; and each round a new fiber spins in fiber_spin, yields back once,
// spins again and ends. Prints "ready".
#include <boost/context/fiber.hpp>
#include <cstdio>
#include <utility>

namespace ctx = boost::context;

static volatile unsigned long sink;

__attribute__((noinline)) static void fiber_spin()
{
	unsigned long x = sink + 1;
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	sink = x;
}

__attribute__((noinline)) static void old_spin()
{
	unsigned long x = sink + 3;
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	sink = x;
}

int main()
{
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	auto forever = [](ctx::fiber &&back) {
		for (;;) {
			old_spin();
			back = std::move(back).resume();
		}
		return std::move(back);
	};
	ctx::fiber old1{forever}, old2{forever};
	std::printf("ready\n");
	for (;;) {
		old1 = std::move(old1).resume();
		old2 = std::move(old2).resume();
		ctx::fiber f{[](ctx::fiber &&back) {
			fiber_spin();
			back = std::move(back).resume();
			fiber_spin();
			return std::move(back);
		}};
		f = std::move(f).resume();
		f = std::move(f).resume();
	}
}
