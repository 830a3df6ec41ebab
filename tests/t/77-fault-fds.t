#!/bin/sh
# The program's descriptors are the program's: one that closes every fd
# above 2 (close_range) or dup2()s its own file over all of them after its
# first CUDA call must find its file holding exactly what it wrote, and the
# trace must still hold every allocation: the writer thread has its own
# descriptor table (preload/writer.c, own_fd_table). Under ASan's timing a
# shared descriptor, checked and then written, once sent 64 trace bytes into
# the program's file. Every other allocation comes from a function without
# unwind information, whose stack libunwind unwinds checking each address:
# its checks once went through a pipe in the program's table, and a program
# that made its own pipe after close_range (closefds pipe) had a byte of it
# eaten and one of stack memory added, and one that opened its file there
# had the file closed under it (preload/unwind_fds.c). tests/shim/closefds.c.
. tests/t/lib.sh
P=$B/tests/shim/closefds
[ -x "$P" ] || { echo "1..0 # SKIP $P not built (make test-bins)"; exit 0; }
D=$(tmpdir)
trap 'rm -rf "$D"' EXIT
for how in close_range dup2 pipe; do
    mkdir -p $D/$how
    out=$(VRAMTRACE_FLUSH_MS=5 LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/$how LD_PRELOAD="$SHIM_PRELOAD" \
        "$P" $how $D/$how.own 4000 2>&1)
    rc=$?
    want="0 $D/$how.own has 6 bytes"
    [ $how = pipe ] && want="$want
pipe has 6 bytes"
    is "$rc $out" "$want" "$how: the program's own file$([ $how = pipe ] && echo " and pipe hold" || echo " holds") exactly what it wrote"
    got=$("$VT" report --json $D/$how 2>/dev/null | python3 -c 'import json, sys
p = json.load(sys.stdin)["processes"][0]
print(p["trace"]["complete"], p["events"]["allocs"], p["events"]["frees"], p["events"]["dropped"])' 2>&1)
    is "$got" "True 4001 4001 0" "$how: the trace is complete with all 4001 allocations"
done
# A program at its descriptor limit (ulimit -n 16) from before its first
# CUDA call, one left for the runtime's own dlopen of the driver: the
# shim's loads (libzstd, libunwind) and its trace (in the writer's own
# table) need one at a time; the program gets the same descriptors, and the
# trace is whole.
full() { # OUT PRELOAD
    LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/full LD_PRELOAD="$2" sh -c 'ulimit -n 16 && exec "$0" full "$1" 3000' \
        "$P" $D/full.own >$1 2>$1.err
    echo $? >$1.rc
}
mkdir -p $D/full
full $D/full.plain ""
full $D/full.out "$SHIM_PRELOAD"
# (How many it holds depends on what the test's own parent left open.)
is "$(cat $D/full.plain.rc) $(sed 's/held [1-9][0-9]* /held N /' $D/full.plain)" "0 held N descriptors, one left, through 3000 pairs
$D/full.own has 6 bytes" "at the descriptor limit: the program takes all it can and runs (without the shim)"
is "$(cat $D/full.out.rc) $(cat $D/full.out)" "$(cat $D/full.plain.rc) $(cat $D/full.plain)" \
    "at the descriptor limit: the same descriptors and output under the shim"
got=$("$VT" report --json $D/full 2>/dev/null | python3 -c 'import json, sys
p = json.load(sys.stdin)["processes"][0]
print(p["trace"]["complete"], p["events"]["allocs"], p["events"]["frees"], p["events"]["dropped"])' 2>&1)
is "$got" "True 3001 3001 0" "at the descriptor limit: the trace is complete with all 3001 allocations"
# VRAMTRACE_UNWIND=check:FILE kept FILE open in the program's table: after
# close_range the check's summary, written at exit, went to whatever held
# that number then (here nothing: it was lost; a file the program opened
# there would have taken it). FILE is now opened for each line and closed
# again.
mkdir -p $D/chk
out=$(VRAMTRACE_UNWIND=check:$D/chk.log LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/chk LD_PRELOAD="$SHIM_PRELOAD" \
    "$P" close_range $D/chk.own 400 2>&1)
is "$? $out $(wc -c <$D/chk.own)" "0 $D/chk.own has 6 bytes 6" "check:FILE, close_range: the program's file holds its 6 bytes after exit too"
check "check:FILE, close_range: the summary is in FILE" grep -q '^vramtrace: unwind check summary: pid [0-9]* stacks [1-9]' $D/chk.log
"$VT" dump --stacks $D/pipe/*.vtrace >$D/pipe.dump 2>/dev/null
is "$(awk '/^event .*api=cudaMalloc .*size=4096 / && ++n == 2 { getline f0; getline f1; split(f0, a); split(f1, b); print a[3], b[3]; exit }' $D/pipe.dump)" \
    "nocfi_malloc main" "pipe: a stack through the function without unwind information reaches main"
# Nothing of the shim's in the program's table: the first CUDA call adds no
# descriptor there (libunwind's pipe took two).
newfds='
import ctypes, os
before = set(os.listdir("/proc/self/fd"))
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
rt.cudaMalloc(ctypes.byref(p), 1 << 20)
print("new", sorted(set(os.listdir("/proc/self/fd")) - before, key=int))
'
mkdir -p $D/newfds
LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/newfds LD_PRELOAD="$SHIM_PRELOAD" python3 -c "$newfds" >$D/newfds.out 2>&1
is "$(cat $D/newfds.out)" "new []" "the first CUDA call opens no descriptor in the program's table"
# The program's table never holds the trace: the writer thread has a table
# of its own, with the trace and stderr only.
fdlist='
import ctypes, os, sys
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
rt.cudaMalloc(ctypes.byref(p), 1 << 20)
def traces(d):
    out = []
    for f in os.listdir(d):
        try:
            if os.readlink(d + "/" + f).endswith(".vtrace"):
                out.append(int(f))
        except OSError:
            pass
    return out
import time
print("program", traces("/proc/self/fd"))
# The writer opens a file for a moment now and then (a module to read its
# symbols, its own fd directory): read its table until it is at rest (2 s
# at most); a descriptor it kept would be in every reading.
for attempt in range(40):
    lines = []
    for t in sorted(os.listdir("/proc/self/task")):
        comm = open("/proc/self/task/%s/comm" % t).read().strip()
        if comm == "vramtrace":
            fds = sorted(int(f) for f in os.listdir("/proc/self/task/%s/fd" % t))
            tr = traces("/proc/self/task/%s/fd" % t)
            lines.append(("writer", [f if f not in tr else "trace" for f in fds], "trace fd high" if tr and tr[0] >= 64 else ""))
    if all(l[1] == ["trace"] for l in lines):
        break
    time.sleep(0.05)
for l in lines:
    print(*l)
'
mkdir -p $D/fdnum
LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/fdnum LD_PRELOAD="$SHIM_PRELOAD" python3 -c "$fdlist" >$D/fdnum.out 2>&1
is "$(cat $D/fdnum.out)" "program []
writer ['trace'] trace fd high" "the program's table holds no trace; the writer's holds the trace alone, high"

# A program that closes its stderr (a pipe to its launcher) and goes on:
# the writer's table kept a copy of stderr, which held the pipe open, and
# the launcher saw EOF only when the program exited (2 s later, not at
# once). The writer keeps no stderr now; what it says waits for a thread
# of the program.
closer='
import ctypes, os, time
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
rt.cudaMalloc(ctypes.byref(p), 1 << 20)
os.write(2, b"started\n")
os.close(1)
os.close(2)
time.sleep(2)
'
mkdir -p $D/eof
eof=$(LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/eof LD_PRELOAD="$SHIM_PRELOAD" python3 -c '
import subprocess, sys, time
t = time.time()
p = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
data = p.stderr.read()
took = time.time() - t
p.wait()
print(data.decode().strip(), "eof-at-once" if took < 1.5 else "eof-at-exit (%.1f s)" % took)' "$closer")
is "$eof" "started eof-at-once" "the program closes its stderr pipe: its reader sees EOF then, not when the program exits"
is "$(ls $D/eof | wc -l)" 1 "... and the program is traced"
"$VT" dump $D/fdnum/*.vtrace | grep -c 'shared-fds' >$D/fdnum.dump
is "$(cat $D/fdnum.dump)" "0" "the trace does not say its descriptor was shared"

# Where unshare is refused (Docker's default seccomp profile), the
# descriptor is the program's to see: it lives high, a closed one is
# reopened, and the trace says it was shared.
N="$B/tests/shim/refuse unshare --"
mkdir -p $D/shared $D/sharedfd
out=$(VRAMTRACE_FLUSH_MS=5 LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/shared LD_PRELOAD="$SHIM_PRELOAD" \
    $N "$P" close_range $D/shared.own 4000 2>&1)
is "$? $out" "0 $D/shared.own has 6 bytes" "shared table, close_range: the program's own file holds exactly what it wrote"
got=$("$VT" report --json $D/shared 2>/dev/null | python3 -c 'import json, sys
p = json.load(sys.stdin)["processes"][0]
print(p["trace"]["complete"], p["events"]["allocs"], p["events"]["frees"], p["trace"]["shim_without"])' 2>&1)
is "$got" "True 4001 4001 ['unshare(CLONE_FILES)']" "shared table, close_range: the trace is complete and says the table was shared"
"$VT" report --wide $D/shared >$D/shared.txt 2>/dev/null
check "shared table: the text report says so, with the window it leaves" \
    grep -q "^NOTE: the shim could not give its writer a descriptor table of its own (unshare(CLONE_FILES) refused, .*in the instant between the check and the write" $D/shared.txt
LD_LIBRARY_PATH=$SIM VRAMTRACE_DIR=$D/sharedfd LD_PRELOAD="$SHIM_PRELOAD" $N python3 -c "$fdlist" >$D/sharedfd.out 2>&1
n=$(sed -n 's/^program \[\([0-9]*\)\]$/\1/p' $D/sharedfd.out)
check "shared table: the trace fd is high ($n)" test "${n:-0}" -ge 64
done_testing
