#!/bin/sh
# The call graph between the shim's files, read from their objects: file A
# depends on file B when A.o leaves undefined a vt_* symbol that B.o
# defines. Prints the files that call each other in a circle (the strongly
# connected components of more than one file), one circle a line, files
# sorted; with -e, every edge "A -> B" first. Inline functions and macros
# from the headers leave no symbol, so they make no edge.
#
#   scripts/preload-graph.sh [-e] [OBJDIR]     (default build/obj/preload)
set -eu
edges=0
if [ "${1:-}" = -e ]; then
    edges=1
    shift
fi
dir=${1:-build/obj/preload}
set -- "$dir"/*.o
[ -f "$1" ] || { echo "preload-graph: no objects in $dir (run make first)" >&2; exit 2; }
for o in "$@"; do
    f=${o##*/}
    # nm -P: "name type value size"; a defined global is any upper-case
    # type but U (and w/v for weak ones).
    nm -P "$o" | awk -v f="${f%.o}" '$1 ~ /^vt_/ { print f, $2, $1 }'
done | awk -v show_edges=$edges '
    $2 == "U" { need[++n] = $1 " " $3; next }
    $2 ~ /^[A-TV-Z]$/ { def[$3] = $1; files[$1] = 1 }
    END {
        for (i = 1; i <= n; i++) {
            split(need[i], p, " ")
            if ((p[2] in def) && def[p[2]] != p[1]) {
                files[p[1]] = 1
                reach[p[1], def[p[2]]] = 1
            }
        }
        nf = 0
        for (f in files) name[++nf] = f
        # sorted names, so the output is stable
        for (i = 1; i <= nf; i++)
            for (j = i + 1; j <= nf; j++)
                if (name[j] < name[i]) { t = name[i]; name[i] = name[j]; name[j] = t }
        if (show_edges)
            for (i = 1; i <= nf; i++)
                for (j = 1; j <= nf; j++)
                    if ((name[i], name[j]) in reach) print name[i] " -> " name[j]
        # transitive closure (Floyd-Warshall): a few dozen files
        for (k = 1; k <= nf; k++)
            for (i = 1; i <= nf; i++) {
                if (!((name[i], name[k]) in reach)) continue
                for (j = 1; j <= nf; j++)
                    if ((name[k], name[j]) in reach) reach[name[i], name[j]] = 1
            }
        for (i = 1; i <= nf; i++) {
            if (done[name[i]]) continue
            line = name[i]
            for (j = i + 1; j <= nf; j++)
                if (((name[i], name[j]) in reach) && ((name[j], name[i]) in reach)) {
                    line = line " " name[j]
                    done[name[j]] = 1
                }
            if (line != name[i]) print "cycle: " line
        }
    }'
