#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The shared library exports exactly the functions declared in the public
# header, and the version script lists exactly those; every global of the
# static library carries the knitk_ prefix (knitk__ for internals), so a
# program linking it statically may use any other name.
set -u
so=$1 hdr=$2 map=$3 ar=$4
inc=$(cd "$(dirname "$0")/../include" && pwd)
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
nm -g --defined-only "$ar" | awk 'NF == 3 { print $3 }' | sort -u >"$t/globals"
if [ -s "$t/globals" ] && ! grep -v '^knitk_' "$t/globals" >"$t/unprefixed"; then
	echo "ok - lib: exports: every global of the static library is knitk_ prefixed"
else
	sed 's/^/# unprefixed: /' "$t/unprefixed"
	echo "not ok - lib: exports: every global of the static library is knitk_ prefixed"
	rc=1
fi
# A program with functions of common names links with the static library.
cat >"$t/names.c" <<'EOF'
#include <knitk_pool.h>
void worker_run(void) { }
void pool_free(void) { }
void spawn_worker(void) { }
void monitor_start(void) { }
void call_complete_locked(void) { }
int main(void) { return knitk_pool_create((void *)0, (void *)0, (void *)0) == -22 ? 0 : 1; }
EOF
if ${CC:-cc} -I"$inc" -I"$inc/../../uapi" -o "$t/names" "$t/names.c" "$ar" -pthread \
	>"$t/names.log" 2>&1 && "$t/names"; then
	echo "ok - lib: exports: a program defining worker_run() and pool_free() links statically"
else
	sed 's/^/# /' "$t/names.log"
	echo "not ok - lib: exports: a program defining worker_run() and pool_free() links statically"
	rc=1
fi
exit $rc
