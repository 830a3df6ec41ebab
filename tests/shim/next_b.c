/* RTLD_NEXT test, second library: the definition RTLD_NEXT must find. */
__attribute__((visibility("default"))) const char *which(void) { return "b"; }
