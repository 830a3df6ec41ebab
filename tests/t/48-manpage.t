#!/bin/sh
# The man page and --help agree: every command of `vramtrace --help` has a
# section (.SS NAME) in docs/vramtrace.1 listing exactly the flags of its own
# --help, and the ENVIRONMENT section lists exactly the variables the shim's
# options table reads plus those an analyzer --help names. VT_MAN points at
# another page to check (default docs/vramtrace.1).
. tests/t/lib.sh
MAN=${VT_MAN:-docs/vramtrace.1}

# Flags: -x or --long-name starting a word (after a space, comma, bracket,
# parenthesis or bar), --help aside (every command has it).
flags() { grep -oE -- '(^|[][ ,(|])--?[a-z][a-z0-9-]*' | sed 's/^[][ ,(|]//' | grep -vx -e --help -e -h | sort -u; }
# The roff source as text: \- is -, font changes go.
plain() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$MAN"; }
# One command's section: from ".SS NAME" to the next .SS or .SH.
section() { plain | awk -v name="$1" '/^\.S[HS] / { inside = ($0 == ".SS " name); next } inside'; }

commands=$("$VT" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }' | sort)
is "$(plain | sed -n 's/^\.SS //p' | sort)" "$commands" "a section for exactly the commands of vramtrace --help"
for c in $commands; do
    help=$("$VT" "$c" --help 2>&1 | flags | tr '\n' ' ')
    man=$(section "$c" | flags | tr '\n' ' ')
    is "$man" "$help" "$c: the man page lists exactly the flags of its --help"
done

shim=$(grep -o '"VRAMTRACE_[A-Z_]*"' preload/options.c | tr -d '"')
named=$(for c in $commands; do "$VT" "$c" --help 2>&1; done | grep -oE 'VRAMTRACE_[A-Z_]+')
want=$(printf '%s\n' $shim $named | sort -u | tr '\n' ' ')
got=$(plain | awk '/^\.SH / { inside = ($0 == ".SH ENVIRONMENT"); next } inside && /^\.B VRAMTRACE_/ { print $2 }' | sort -u | tr '\n' ' ')
is "$got" "$want" "ENVIRONMENT lists exactly the shim's variables and those --help names"

# Installed alone in share/man: it must not send the reader elsewhere.
is "$(grep -c -e README -e 'docs/' "$MAN")" 0 "the man page points to no file that is not installed"
check "man renders it without warnings" sh -c "! command -v man >/dev/null || [ -z \"\$(MANWIDTH=80 man --warnings -l '$MAN' 2>&1 >/dev/null)\" ]"
done_testing
