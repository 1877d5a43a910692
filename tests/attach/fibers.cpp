// fibers.cpp: a program started without coprof that makes Boost.Context fibers
// (boost::context::fiber, through libboost_context.so's make_fcontext and
// jump_fcontext) for ever, for tests/attach/attach.py's case fibers: each round a new
// fiber spins in fiber_spin, yields back once, spins again and ends. Prints "ready".
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

int main()
{
	std::setvbuf(stdout, nullptr, _IOLBF, 0);
	std::printf("ready\n");
	for (;;) {
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
