/* plain.c: a program built without -finstrument-functions: trace mode sees nothing. */
#include <stdio.h>

int main(void)
{
	printf("plain: hello\n");
	return 0;
}
