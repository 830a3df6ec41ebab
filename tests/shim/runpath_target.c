/* libtarget.so, found only through libopener.so's RUNPATH. */
const char *target_name(void)
{
    return "target";
}
