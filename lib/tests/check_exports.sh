#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The shared library exports exactly the functions declared in the public
# header, and the version script lists exactly those.
set -u
so=$1 hdr=$2 map=$3
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
nm -D --defined-only "$so" | awk '$2 == "T" { print $3 }' | sed 's/@.*//' | sort -u >"$t/exported"
# Function declarations: "name(" after a return type at the start of a line.
sed -n 's/^[a-z].*[ *]\(knitk_[a-z0-9_]*\)(.*/\1/p' "$hdr" | sort -u >"$t/declared"
sed -n 's/^[[:space:]]*\(knitk_[a-z0-9_]*\);/\1/p' "$map" | sort -u >"$t/mapped"
rc=0
if [ -s "$t/declared" ] && cmp -s "$t/exported" "$t/declared"; then
	echo "ok - lib: exports: shared library exports exactly the $(wc -l <"$t/declared") header functions"
else
	echo "# exported vs declared:"; diff "$t/exported" "$t/declared" | sed 's/^/# /'
	echo "not ok - lib: exports: shared library exports exactly the header functions"
	rc=1
fi
if cmp -s "$t/mapped" "$t/declared"; then
	echo "ok - lib: exports: version script lists exactly the header functions"
else
	diff "$t/mapped" "$t/declared" | sed 's/^/# /'
	echo "not ok - lib: exports: version script lists exactly the header functions"
	rc=1
fi
exit $rc
