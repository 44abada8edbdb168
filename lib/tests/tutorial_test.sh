#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The programs of docs/tutorial.md, as written there: every ```c block is
# preceded by a line "<!-- file: NAME.c -->", compiles with -Wall -Wextra
# -Werror against the headers and the shared library, and runs to exit
# status 0 on the futex backend.  lane_host and lane_worker run together:
# lane_host listens on a Unix socket in a scratch directory, lane_worker
# connects once it says so, and both must exit 0.  Every run is under
# timeout -s KILL 60, a guard against a hang, not a claim about speed.
set -u
: "${BUILD:?}" "${TOP:?}"
doc=$TOP/docs/tutorial.md
# The programs the page must hold; pair_a and pair_b run together.
want="thread_pool process_pool lane_host lane_worker event_loop"
pair_a=lane_host
pair_b=lane_worker
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
rc=0

# Each block goes to $t/src/NAME.c; $t/names lists NAME once per block,
# $t/orphans the line numbers of ```c blocks with no file line before them.
mkdir -p "$t/src"
awk -v dir="$t/src" -v names="$t/names" -v orphans="$t/orphans" '
/^<!-- file: [A-Za-z0-9_]+\.c -->$/ {
	name = $3; sub(/\.c$/, "", name); armed = NR; next
}
/^```c$/ {
	if (armed == NR - 1) {
		out = dir "/" name ".c"; print name >names; on = 1
	} else {
		print NR >orphans
	}
	next
}
/^```$/ { on = 0; next }
on { print >out }
' "$doc"
touch "$t/names" "$t/orphans"
found=$(wc -l <"$t/names")
nwant=$(wc -w <<<"$want")
dups=$(sort "$t/names" | uniq -d)
if [ "$found" -lt "$nwant" ] || [ -s "$t/orphans" ] || [ -n "$dups" ]; then
	sed 's/^/# found: /' "$t/names"
	sed 's/^/# a ```c block with no file line before it at line /' "$t/orphans"
	[ -n "$dups" ] && printf '%s\n' "$dups" | sed 's/^/# named twice: /'
	echo "not ok - lib: tutorial: $nwant programs in docs/tutorial.md, each named by a file line"
	exit 1
fi
for p in $want; do
	if ! grep -qx -- "$p" "$t/names"; then
		echo "not ok - lib: tutorial: no program $p.c in docs/tutorial.md"
		rc=1
	fi
done
[ "$rc" -eq 0 ] || exit 1
echo "ok - lib: tutorial: $found programs in docs/tutorial.md, each named by a file line"

built=
while read -r p; do
	if ${CC:-gcc} -std=gnu11 -Wall -Wextra -Werror -I"$TOP/lib/include" \
		-I"$TOP/uapi" "$t/src/$p.c" -o "$t/$p" -L"$BUILD" -lknitk \
		-Wl,-rpath,"$BUILD" -pthread >"$t/$p.cc" 2>&1; then
		echo "ok - lib: tutorial: $p compiles"
		built="$built $p"
	else
		sed 's/^/# /' "$t/$p.cc"
		echo "not ok - lib: tutorial: $p compiles"
		rc=1
	fi
done <"$t/names"

is_built() {	# is_built <name>
	case " $built " in *" $1 "*) return 0 ;; esac
	return 1
}

report() {	# report <name> <exit status> <output file>
	sed 's/^/# /' "$3"
	if [ "$2" -eq 0 ]; then
		echo "ok - lib: tutorial: $1 runs"
	else
		[ "$2" -eq 137 ] && echo "# killed by SIGKILL: a hang, if it ran 60 s"
		echo "not ok - lib: tutorial: $1 runs (exit status $2)"
		rc=1
	fi
}

for p in $built; do
	case $p in "$pair_a"|"$pair_b") continue ;; esac
	KNITK_BACKEND=futex timeout -s KILL 60 "$t/$p" >"$t/$p.out" 2>&1
	report "$p" $? "$t/$p.out"
done

# The pair: lane_host first, lane_worker once lane_host listens.
if is_built "$pair_a" && is_built "$pair_b"; then
	sock=$t/knot.sock
	KNITK_BACKEND=futex timeout -s KILL 60 "$t/$pair_a" "$sock" \
		>"$t/$pair_a.out" 2>&1 &
	apid=$!
	# Until it listens or has exited; 600 rounds of 0.1 s bound the wait.
	for _ in $(seq 600); do
		grep -q 'listening' "$t/$pair_a.out" && break
		kill -0 "$apid" 2>/dev/null || break
		sleep 0.1
	done
	KNITK_BACKEND=futex timeout -s KILL 60 "$t/$pair_b" "$sock" \
		>"$t/$pair_b.out" 2>&1
	bst=$?
	# A worker that failed may leave lane_host waiting for it: end it
	# (timeout passes the TERM on).
	[ "$bst" -eq 0 ] || kill "$apid" 2>/dev/null
	wait "$apid" 2>/dev/null
	ast=$?
	report "$pair_a" "$ast" "$t/$pair_a.out"
	report "$pair_b" "$bst" "$t/$pair_b.out"
fi
exit $rc
