#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The event-loop examples against their load generator: echo_epoll and
# echo_uring, offloading to the pool and inline, each serving a bounded
# number of requests over many connections, every reply checked by
# echo_load; and loan, calls whose argument is written in place, with
# thread and process workers.  TAP lines; the requests/s go to the
# comments.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${EXAMPLES_OUT:-$here/../../build/examples}
conns=${KNITK_EXAMPLE_CONNS:-16}
reqs=${KNITK_EXAMPLE_REQS:-1000}
rc=0
if ! make -s -C "$here/../examples" OUT="$out" >"$out.log" 2>&1; then
	sed 's/^/# /' "$out.log"
	echo "not ok - examples: build"
	exit 1
fi
echo "ok - examples: build"
for kind in -t -p; do
	name="examples: loan ($kind): loans filled in place, sent alone and in batches, every checksum right, records masked and answered in place"
	if res=$(KNITK_BACKEND=futex timeout 120 "$out/loan" $kind 2>&1); then
		printf '%s\n' "$res" | sed 's/^/# /'
		echo "ok - $name"
	else
		printf '%s\n' "$res" | sed 's/^/# /'
		echo "not ok - $name"
		rc=1
	fi
done
for srv in echo_epoll echo_uring; do
	for mode in pool inline; do
		flag=; [ "$mode" = inline ] && flag=-i
		log=$(mktemp)
		"$out/$srv" $flag -n $((conns * reqs)) >"$log" 2>&1 &
		pid=$!
		port=
		for _ in $(seq 100); do
			port=$(sed -n 's/^listening on port //p' "$log")
			[ -n "$port" ] && break
			sleep 0.1
		done
		name="examples: $srv ($mode): $conns connections x $reqs requests, every reply checked"
		if [ -n "$port" ] && timeout 120 "$out/echo_load" "$port" "$conns" "$reqs" >"$log.load" 2>&1 &&
		   timeout 60 tail --pid=$pid -f /dev/null && wait $pid; then
			sed 's/^/# /' "$log.load" "$log"
			echo "ok - $name"
		else
			sed 's/^/# /' "$log.load" "$log" 2>/dev/null
			kill $pid 2>/dev/null
			echo "not ok - $name"
			rc=1
		fi
		rm -f "$log" "$log.load"
	done
done
exit $rc
