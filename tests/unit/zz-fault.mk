# tests/unit/zz-fault.mk: pulls in the fuzzing and fault-injection make
# fragments (tests/fuzz/fuzz.mk, tests/fault/fault.mk). It lives here
# because the top Makefile includes tests/unit/*.mk before tests/tests.mk,
# which reads TEST_BINS; "zz" sorts it after the fragments it builds on.
-include tests/fuzz/fuzz.mk tests/fault/fault.mk
