/* Prints what libopener.so's dlopen("libtarget.so") found: "target" when
 * the load searched libopener's RUNPATH, as without the shim. */
#include <stdio.h>
const char *opener_open(void);
int main(void)
{
    printf("%s\n", opener_open());
    return 0;
}
