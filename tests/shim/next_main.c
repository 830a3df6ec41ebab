/* Prints what RTLD_NEXT finds from inside next_a: must be "b". */
#include <stdio.h>
const char *next_which(void);
int main(void)
{
    printf("%s\n", next_which());
    return 0;
}
