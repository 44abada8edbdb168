#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The "vm" step of make check: builds the module (with the kselftests'
# fault-injection points, KNITK_TEST_HOOKS=y), the kselftests (static)
# and the demo, boots Debian's 6.1 kernel once under QEMU (tools/vm.sh), and
# turns the guest console into flat TAP lines:
#
#   ok - vm: modprobe knitk
#   ok - vm: <prog>: <test>          one per KTAP result of each program
#   ok - vm: rmmod knitk
#   ok - vm: guest kernel log clean
#   ok - vm: guest powered off
#
# QEMU or the kernel image missing is a failure, not a skip: CI installs
# them with tools/deps.sh.
#
#   VM_TIMEOUT        seconds for the whole boot (default 900)
#   VM_PROG_TIMEOUT   seconds per program inside the guest (default 300)
#   VM_KDIR           boot this kbuild output directory's kernel instead
#                     (tools/vm-debug.sh), the module built against it
#   VM_KMEMLEAK=1     scan for kernel memory leaks after rmmod (needs
#                     CONFIG_DEBUG_KMEMLEAK): "ok - vm: kmemleak clean"
#   VM_WORK           work directory (default build/vm)
#   VM_MODULE         boot this knitk.ko as built, e.g. DKMS's (no test
#                     hooks: programs that need them skip or must be left
#                     out), instead of building one
#   VM_PROGS          the kselftest programs to run (default: all of
#                     TEST_GEN_PROGS, then the demo and the event-loop
#                     examples); glib_pool and uv_pool name the examples
#
#   tools/vm-check.sh --parse CONSOLE PROG...   re-reads a saved console
set -eu

root_dir=$(cd "$(dirname "$0")/.." && pwd)
cd "$root_dir"

work=${VM_WORK:-$root_dir/build/vm}
mkdir -p "$work"
work=$(cd "$work" && pwd)
# Hang guards, not speed limits: a TCG guest on a loaded machine is slow.
timeout_s=${VM_TIMEOUT:-2700}
prog_timeout=${VM_PROG_TIMEOUT:-1800}
ksft_out=$work/selftests
tools_out=$root_dir/build/tools
mkdir -p "$work" "$ksft_out"

failed=0
fail() { echo "not ok - vm: $*"; failed=1; }

# Runs a build quietly; on failure prints its log's tail as comments.
build() {
	local what=$1 log=$work/build-$1.log
	shift
	if "$@" >"$log" 2>&1; then
		return 0
	fi
	fail "build $what"
	tail -n 40 "$log" | sed 's/^/# /'
	return 1
}

# Prints the TAP lines of one boot from its console: modprobe, each of
# names (programs in run order), rmmod, the kernel log and the poweroff.
parse_console() {
	local console=$1 vm_rc=$2 offending bad
	shift 2
	local names="$*"

	awk -v names="$names" '
	function flush_prog(name, status,    r) {
		if (status == "") {
			print "not ok - vm: " name ": did not finish"
			return
		}
		if (status == "timeout") {
			print "not ok - vm: " name ": timed out, killed in the guest"
			return
		}
		# Exit status 4 is KSFT_SKIP of kselftest.
		if (status == 4 && nfail == 0) {
			if (nres == 0)
				print "ok - vm: " name " # SKIP exit status 4"
		} else if (status != 0 && nfail == 0) {
			print "not ok - vm: " name ": exit status " status
		} else if (nres == 0) {
			print "ok - vm: " name ": exit status 0"
		} else if (plan != "" && nres < plan) {
			print "not ok - vm: " name ": " nres " of " plan " results"
		}
	}
	# One "knitk-vm: <what> status=N" line of the guest script.
	function step_status(what,    st) {
		st = substr($0, index($0, "=") + 1)
		if (st == 0) print "ok - vm: " what
		else print "not ok - vm: " what ": status " st
	}
	BEGIN {
		n = split(names, order, " ")
		next_prog = 1
	}
	/^knitk-vm: modprobe knitk status=/ {
		modprobe = 1
		step_status("modprobe knitk")
		next
	}
	/^knitk-vm: begin / {
		cur = $3; nres = 0; nfail = 0; plan = ""
		inprog = 1
		next
	}
	/^knitk-vm: end / {
		st = $4; sub(/^status=/, "", st)
		flush_prog(cur, st)
		done[next_prog++] = 1
		inprog = 0
		next
	}
	/^knitk-vm: rmmod knitk status=/ {
		rmmod = 1
		step_status("rmmod knitk")
		next
	}
	inprog && /^1\.\.[0-9]+/ {
		plan = substr($1, 4) + 0
		next
	}
	inprog && /^(not )?ok [0-9]+ / {
		nres++
		line = $0
		status = "ok"
		if (line ~ /^not /) { status = "not ok"; sub(/^not /, "", line); nfail++ }
		sub(/^ok [0-9]+ /, "", line)
		# Keep a SKIP directive, drop any other (e.g. the harness TODO).
		if (match(line, / # [Ss][Kk][Ii][Pp]/)) {
			reason = substr(line, RSTART + RLENGTH)
			sub(/^ +/, "", reason)
			line = substr(line, 1, RSTART - 1) " # SKIP " reason
			sub(/ +$/, "", line)
		} else {
			sub(/ # .*$/, "", line)
		}
		print status " - vm: " cur ": " line
		next
	}
	END {
		if (!modprobe) print "not ok - vm: modprobe knitk: no result"
		if (inprog) flush_prog(cur, "")
		for (i = next_prog + (inprog ? 1 : 0); i <= n; i++)
			print "not ok - vm: " order[i] ": did not finish"
		if (!rmmod) print "not ok - vm: rmmod knitk: no result"
	}
	' "$console" | tee "$work/results.tap"
	grep -q '^not ok ' "$work/results.tap" && failed=1

	# The guest kernel log: the live copy from the second serial port (it
	# survives a hang), the dumped dmesg, and any kernel line that reached
	# the console (a panic prints there even with dmesg -n 1).  Timestamps
	# are dropped so one message read twice is reported once.
	kmsg=$(dirname "$console")/kmsg.log
	# Lockdep's reports start with WARNING: or BUG:; the rest are the
	# lines it and kmemleak print on their own (a lockdep that turned
	# itself off checks nothing more).
	bad='WARNING:|BUG:|Oops|general protection|Call Trace|refcount_t|list_add corruption|list_del corruption|kernel BUG|blocked for more than|hung_task|Kernel panic|UBSAN:|KASAN:|INFO: trying to register non-static key|stack-protector|detected stall|stalls on CPUs|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|DEBUG_LOCKS_WARN_ON|turning off the locking correctness validator|suspected memory leak'
	offending=$({
		[ -f "$kmsg" ] && tr -d '\r' <"$kmsg"
		awk '
			/^knitk-vm: dmesg begin/ { indmesg = 1; next }
			/^knitk-vm: dmesg end/ { indmesg = 0; next }
			indmesg || /^\[ *[0-9]+\.[0-9]+\] / { print }
		' "$console"
	} | sed -E 's/^[0-9]+,[0-9]+,[0-9]+,[^;]*;//; s/^\[ *[0-9]+\.[0-9]+\] //' |
		grep -E "$bad" | awk '!seen[$0]++' || true)
	if [ -n "$offending" ]; then
		fail "guest kernel log clean"
		printf '%s\n' "$offending" | sed 's/^/#   /'
	elif [ -s "$kmsg" ] || grep -q '^knitk-vm: dmesg end' "$console"; then
		echo "ok - vm: guest kernel log clean"
	else
		fail "guest kernel log clean: no kernel log captured"
	fi

	# The leak scan of vm.sh -L, when the console has one.
	if grep -q '^knitk-vm: kmemleak begin' "$console"; then
		leaks=$(awk '/^knitk-vm: kmemleak begin/ { on = 1; next }
			/^knitk-vm: kmemleak end/ { on = 0; done = 1 }
			on { print }
			END { if (!done) print "no end of the scan" }' "$console")
		if [ -z "$leaks" ]; then
			echo "ok - vm: kmemleak clean"
		else
			fail "kmemleak clean"
			printf '%s\n' "$leaks" | head -n 60 | sed 's/^/#   /'
		fi
	fi

	case "$vm_rc" in
	0) echo "ok - vm: guest powered off" ;;
	124) fail "guest powered off: killed after ${timeout_s}s" ;;
	*)
		if grep -q 'Kernel panic' "$console"; then
			fail "guest powered off: kernel panic"
		else
			fail "guest powered off: vm.sh status $vm_rc"
		fi
		;;
	esac
}

# Re-reads a saved console without booting:
#   tools/vm-check.sh --parse CONSOLE PROG...
if [ "${1:-}" = "--parse" ]; then
	[ "$#" -ge 2 ] || { echo "usage: $0 --parse CONSOLE PROG..." >&2; exit 2; }
	console=$2
	shift 2
	rc=1
	grep -q '^knitk-vm: poweroff$' "$console" && rc=0
	parse_console "$console" "$rc" "$@"
	exit "$failed"
fi

# Without the module nothing can run; a broken test program only loses
# itself (make -k), and is reported as not built below.
vm_opts=()
module=$root_dir/kmod/knitk.ko
if [ -n "${VM_MODULE:-}" ]; then
	module=$VM_MODULE
	[ -f "$module" ] || { fail "module $module missing"; exit 1; }
elif [ -n "${VM_KDIR:-}" ]; then
	# A copy of the sources, so kmod/ keeps its objects for Debian's kernel.
	mod_src=$work/module
	mkdir -p "$mod_src"
	rsync -a --include='*/' --include='*.[ch]' --include=Kbuild --include=Kconfig \
		--exclude='*' Kbuild kmod uapi "$mod_src/"
	build module make -C "$VM_KDIR" M="$mod_src" KNITK_TEST_HOOKS=y modules || exit 1
	module=$mod_src/kmod/knitk.ko
	vm_opts+=(-b "$VM_KDIR")
else
	# The kernel the guest boots, whatever `make module` would pick here.
	kver=$(tools/kver.sh 2>"$work/kver.log") ||
		{ fail "build module: $(cat "$work/kver.log")"; exit 1; }
	build module make module KVER="$kver" KNITK_TEST_HOOKS=y || exit 1
fi
if [ "${VM_KMEMLEAK:-0}" = 1 ]; then
	vm_opts+=(-L)
fi
if [ -f lib/Makefile ]; then
	build lib make -C lib || true
fi
build selftests make -k -C selftests/knitk OUTPUT="$ksft_out" || true
build tools make -C tools OUTPUT="$tools_out" demo || true
# The pool in GLib's and libuv's loops, with thread and process workers
# (event mode with process workers needs the module: the host step runs
# them with threads only).  Dynamic: vm.sh copies their libraries in.
examples_out=$work/examples
loop_examples="glib_pool uv_pool"
build examples make -C lib/examples OUT="$examples_out" \
	"$examples_out/glib_pool" "$examples_out/uv_pool" || true

progs=()
while IFS= read -r p; do
	[ -n "$p" ] || continue
	case " $loop_examples " in
	*" $p "*) prog=$examples_out/$p args=" -t -p" ;;
	*) prog=$ksft_out/$p args= ;;
	esac
	if [ -x "$prog" ]; then
		progs+=("$prog$args")
	else
		fail "$p: not built"
	fi
done < <(if [ -n "${VM_PROGS:-}" ]; then printf '%s\n' $VM_PROGS
	  else make -s -C selftests/knitk list; fi)
[ -z "${VM_PROGS:-}" ] && [ -x "$tools_out/knitk-demo" ] && progs+=("$tools_out/knitk-demo")
if [ -z "${VM_PROGS:-}" ]; then
	for p in $loop_examples; do
		if [ -x "$examples_out/$p" ]; then
			progs+=("$examples_out/$p -t -p")
		else
			fail "$p: not built"
		fi
	done
fi
# stat_test executes knitk-stat from its own directory (/bin in the guest).
[ -x "$ksft_out/knitk-stat" ] && vm_opts+=(-a "$ksft_out/knitk-stat")
[ "${#progs[@]}" -gt 0 ] || { fail "no selftest programs listed"; exit 1; }

console=$work/console.log
# Never parse a previous boot's logs.
rm -f "$console" "$work/kmsg.log"
set +e
tools/vm.sh -q -o "$work" -t "$timeout_s" -p "$prog_timeout" -k "$module" \
	${vm_opts[@]+"${vm_opts[@]}"} "${progs[@]}" >"$work/vm.log" 2>&1
vm_rc=$?
set -e
sed 's/^/# /' "$work/vm.log"
[ -f "$console" ] || : >"$console"

names=()
for p in "${progs[@]}"; do
	names+=("$(basename "${p%% *}")")
done
parse_console "$console" "$vm_rc" "${names[@]}"
if [ "$failed" -ne 0 ]; then
	echo "# vm: console in $console"
	exit 1
fi

