/* jumper.c: longjmp out of instrumented frames (instrumented). outer() sets a jump
 * buffer and calls middle() -> inner(), which longjmps back to outer(); outer() then
 * calls after_jump(). Done JUMPS times; the profile must show after_jump called from
 * outer, not from inner. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;

static void inner(void)
{
	longjmp(env, 1);
}

static void middle(void)
{
	inner();
}

static void after_jump(void)
{
}

static void outer(void)
{
	if (setjmp(env) == 0)
		middle();
	after_jump();
}

int main(int argc, char **argv)
{
	int jumps = argc > 1 ? atoi(argv[1]) : 5;
	for (int i = 0; i < jumps; i++)
		outer();
	printf("jumper: %d jumps\n", jumps);
	return 0;
}
