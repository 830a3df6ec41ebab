# tests/unit/zz-bench.mk: pulls in the benchmark's fragment (tests/bench/
# bench.mk), which the top Makefile reaches only through tests/unit/*.mk.
-include tests/bench/bench.mk
