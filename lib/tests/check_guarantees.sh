#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# docs/guarantees.md names, for each promise, the tests that hold knitk to
# it: "host `prog` `case`, ..." (lib/tests/prog.c or .sh) and "guest `prog`
# `case`, ..." (selftests/knitk/prog.c).  Every program named there exists,
# every case named there is in its program (a name "_x" after a case is
# that case's variant: the case with "_x" added, or with its last word
# swapped for it; "a_*" is any case starting "a_"; "fix.case" a harness
# case, each part in the file), and every lib/tests/*_test.c is named there
# or in lib/tests/README.md, every guest selftests/knitk/*_test.c there or
# in selftests/knitk/README.md.
# Usage: check_guarantees.sh [guarantees.md]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
doc=${1:-$top/docs/guarantees.md}
host_dir=$top/lib/tests
guest_dir=$top/selftests/knitk
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

# One line per name of the tests column: "<side> <prog> [<case>]", sides
# "host" or "guest".  Plain words set the side ("host", "guest", "host and
# guest"; "kunit", "Promela" and the like end it); a backquoted *_test or
# *.sh is a program of that side; a backquoted identifier after it a case
# (not a knitk_* one: those name the library's functions and hooks).
awk '
function flush_word(w) {
	if (w == "") return
	if (w == "host" || w == "guest") {
		if (and_pending) { side = side " " w } else { side = w }
		prog = ""
	} else if (w == "kunit" || w == "Promela") {
		side = ""; prog = ""
	}
	and_pending = (w == "and" && (last == "host" || last == "guest"))
	last = w
}
/^\| / {
	if ($0 ~ /\| tests \|[[:space:]]*$/) { intable = 1; next }
	if (!intable) next
	n = split($0, cols, " \\| ")
	cell = cols[n]
	side = ""; prog = ""; and_pending = 0; last = ""
	while (length(cell) > 0) {
		i = index(cell, "`")
		if (i == 0) { pre = cell; cell = "" } else { pre = substr(cell, 1, i - 1) }
		m = split(pre, words, /[^A-Za-z]+/)
		for (k = 1; k <= m; k++) flush_word(words[k])
		if (i == 0) break
		rest = substr(cell, i + 1)
		j = index(rest, "`")
		if (j == 0) break
		tok = substr(rest, 1, j - 1)
		cell = substr(rest, j + 1)
		if (side == "") continue
		if (tok ~ /^[a-z0-9_]+_test$/ || tok ~ /^[a-z0-9_]+\.sh$/) {
			prog = tok
			ns = split(side, sides, " ")
			for (s = 1; s <= ns; s++) print sides[s], prog
		} else if (prog != "" && tok ~ /^[A-Za-z0-9_.*]+$/ && tok !~ /^knitk_/) {
			ns = split(side, sides, " ")
			for (s = 1; s <= ns; s++) print sides[s], prog, tok
		}
	}
	next
}
!/^\|/ { intable = 0 }
' "$doc" >"$t/names"

file_of() {	# file_of <side> <prog>
	local dir=$host_dir
	[ "$1" = guest ] && dir=$guest_dir
	case $2 in
	*.sh) echo "$dir/$2" ;;
	*) echo "$dir/$2.c" ;;
	esac
}

rc=0
report() {	# report <count> <what, when ok> <what, when not>: from $t/bad
	if [ "$1" -gt 0 ] && [ ! -s "$t/bad" ]; then
		echo "ok - lib: guarantees: $2"
	else
		sed 's/^/# /' "$t/bad"
		echo "not ok - lib: guarantees: $3"
		rc=1
	fi
}

# 1. Every program named exists.
: >"$t/bad"
while read -r side prog _; do
	f=$(file_of "$side" "$prog")
	[ -f "$f" ] || echo "$side $prog: no ${f#"$top"/}" >>"$t/bad"
done < <(awk 'NF == 2' "$t/names" | sort -u)
nprogs=$(awk 'NF == 2' "$t/names" | sort -u | wc -l)
report "$nprogs" "the $nprogs test programs named in docs/guarantees.md exist" \
	"the test programs named in docs/guarantees.md exist"

# 2. Every case named is in its program.
has_case() {	# has_case <file> <case> <previous full case>
	local f=$1 c=$2 prev=$3 part parts
	case $c in
	_*)	[ -n "$prev" ] || return 1
		grep -qw -- "$prev$c" "$f" || grep -qw -- "${prev%_*}$c" "$f" ;;
	*.*)	IFS=. read -ra parts <<<"$c"
		for part in "${parts[@]}"; do
			has_case "$f" "$part" "" || return 1
		done ;;
	*'*'*)	grep -q -- "${c%%\**}" "$f" ;;
	*)	grep -qw -- "$c" "$f" ;;
	esac
}
: >"$t/bad"
ncases=0
prev_key= prev=
while read -r side prog c; do
	[ "$side $prog" = "$prev_key" ] || prev=
	prev_key="$side $prog"
	f=$(file_of "$side" "$prog")
	[ -f "$f" ] || continue
	ncases=$((ncases + 1))
	if ! has_case "$f" "$c" "$prev"; then
		echo "$side $prog: no case $c in ${f#"$top"/}" >>"$t/bad"
	fi
	case $c in _*|*'*'*) ;; *) prev=$c ;; esac
done < <(awk 'NF == 3' "$t/names")
report "$ncases" "the $ncases cases named in docs/guarantees.md are in their programs" \
	"the cases named in docs/guarantees.md are in their programs"

# 3. Every test file is named in docs/guarantees.md or its folder's README.
for side in host guest; do
	dir=$(dirname "$(file_of "$side" x_test)")
	readme=$dir/README.md
	: >"$t/bad"
	n=0
	for f in "$dir"/*_test.c; do
		p=$(basename "$f" .c)
		n=$((n + 1))
		grep -qx -- "$side $p" "$t/names" && continue
		[ -f "$readme" ] && grep -q -- "^- \`$p\.c\`" "$readme" && continue
		echo "$side $p: named neither in docs/guarantees.md nor in ${readme#"$top"/}" >>"$t/bad"
	done
	report "$n" "the $n $side test files are named in docs/guarantees.md or ${readme#"$top"/}" \
		"every $side test file is named in docs/guarantees.md or ${readme#"$top"/}"
done
exit $rc
