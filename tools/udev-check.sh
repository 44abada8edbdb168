#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The udev rule packaging/60-knitk.rules, for tools/pkg-check.sh, as flat
# TAP lines ("ok - pkg: udev: ..."):
#   - it parses as udev(7) reads a rules file: comments, line
#     continuations, KEY[{attr}]OP"value" tokens separated by commas, each
#     key known and with an operator it accepts, MODE octal, GROUP a
#     group name; the parser rejects broken variants of the rule, so it
#     does check;
#   - it is one rule, matching the misc device the module registers
#     (SUBSYSTEM=="misc", KERNEL=="<miscdevice .name>"), and assigns
#     exactly GROUP and MODE, nothing else (no OWNER, no RUN);
#   - its group and mode are the ones README.md and knitk(4) document;
#   - udevadm verify, where udev has it (systemd 253 or later), agrees.
#
#   tools/udev-check.sh [RULES]     (default packaging/60-knitk.rules)
set -u
cd "$(dirname "$0")/.." || exit 2
rules=${1:-packaging/60-knitk.rules}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
failed=0
ok() { echo "ok - pkg: udev: $*"; }
not_ok() { echo "not ok - pkg: udev: $*"; failed=1; }

# Prints "rule N KEY OP VALUE" per token, or "error: LINE: why" and exits 1.
parse() {
	awk '
	function fail(why) {
		printf "error: %s:%d: %s\n", FILENAME, start, why
		bad = 1
		exit 1
	}
	BEGIN {
		# Keys udev(7) knows, by the operators each accepts.
		n = split("ACTION DEVPATH KERNEL KERNELS SUBSYSTEM SUBSYSTEMS " \
			  "DRIVER DRIVERS ATTRS TAGS TEST RESULT CONST", m)
		for (i = 1; i <= n; i++) match_only[m[i]] = 1
		n = split("OWNER GROUP MODE SECLABEL RUN LABEL GOTO OPTIONS", m)
		for (i = 1; i <= n; i++) assign_only[m[i]] = 1
		n = split("NAME SYMLINK ENV ATTR SYSCTL TAG PROGRAM IMPORT", m)
		for (i = 1; i <= n; i++) either[m[i]] = 1
	}
	{
		if (line == "") start = FNR
		line = line $0
		if (line ~ /\\$/) { sub(/\\$/, "", line); next }
		s = line
		line = ""
		sub(/^[ \t]+/, "", s)
		if (s == "" || s ~ /^#/) next
		rule++
		while (s != "") {
			if (!match(s, /^[A-Z_]+(\{[^}]*\})?/))
				fail("no key at \"" s "\"")
			key = substr(s, 1, RLENGTH)
			s = substr(s, RLENGTH + 1)
			base = key
			sub(/\{.*/, "", base)
			if (!(base in match_only) && !(base in assign_only) &&
			    !(base in either))
				fail("unknown key " key)
			if (!match(s, /^(==|!=|\+=|-=|:=|=)/))
				fail("no operator after " key)
			op = substr(s, 1, RLENGTH)
			s = substr(s, RLENGTH + 1)
			if (base in match_only && op != "==" && op != "!=")
				fail(key " takes == or !=, not " op)
			if (base in assign_only && (op == "==" || op == "!="))
				fail(key " is assigned, not matched (" op ")")
			if (substr(s, 1, 1) != "\"")
				fail("value of " key " not quoted")
			s = substr(s, 2)
			val = ""
			while (1) {
				i = index(s, "\"")
				if (!i) fail("value of " key " not terminated")
				val = val substr(s, 1, i - 1)
				s = substr(s, i + 1)
				if (substr(val, length(val)) != "\\") break
				val = val "\""
			}
			if (base == "MODE" && val !~ /^0?[0-7][0-7][0-7]$/)
				fail("MODE \"" val "\" is not an octal mode")
			if ((base == "GROUP" || base == "OWNER") &&
			    val !~ /^[a-z_][a-z0-9_-]*$/)
				fail(base " \"" val "\" is not a name")
			print "rule", rule, key, op, val
			if (s == "") break
			if (!match(s, /^[ \t]*,[ \t]*/) && !match(s, /^[ \t]+/))
				fail("no separator after " key)
			s = substr(s, RLENGTH + 1)
		}
	}
	END {
		if (bad) exit 1
		if (line != "") { start = FNR; fail("continuation at the end") }
	}' "$1"
}

if parse "$rules" >"$t/tokens" 2>&1; then
	ok "$rules parses (udev(7) syntax)"
else
	sed 's/^/# /' "$t/tokens"
	not_ok "$rules parses (udev(7) syntax)"
fi

# The parser does check: each broken variant of the rule is refused.
rule_line=$(grep -v '^[[:space:]]*\(#\|$\)' "$rules")
n=0 refused=0
while IFS= read -r variant; do
	n=$((n + 1))
	printf '%s\n' "$variant" >"$t/bad.rules"
	parse "$t/bad.rules" >/dev/null 2>&1 || refused=$((refused + 1))
done <<EOF
$(printf '%s\n' "$rule_line" | sed 's/MODE="0660"/MODE="0660/')
$(printf '%s\n' "$rule_line" | sed 's/GROUP="/GROUP=="/')
$(printf '%s\n' "$rule_line" | sed 's/KERNEL=="/KERNEL="/')
$(printf '%s\n' "$rule_line" | sed 's/MODE="0660"/MODE="0690"/')
$(printf '%s\n' "$rule_line" | sed 's/GROUP="knitk"/GROUP=knitk/')
$(printf '%s\n' "$rule_line" | sed 's/SUBSYSTEM/SUBSYSTM/')
$(printf '%s\n' "$rule_line" | sed 's/", /"/')
$(printf '%s\n' "$rule_line" | sed 's/GROUP="knitk"/GROUP="Knit k"/')
EOF
if [ "$n" -eq 8 ] && [ "$refused" -eq "$n" ]; then
	ok "the parser refuses each of $n broken variants of the rule"
else
	not_ok "the parser refuses each of $n broken variants of the rule ($refused refused)"
fi

# One rule, on the module's misc device, assigning GROUP and MODE only.
tok() { awk -v k="$1" -v o="$2" '$3 == k && $4 == o { print $5 }' "$t/tokens"; }
name=$(sed -n 's/^[[:space:]]*\.name[[:space:]]*=[[:space:]]*"\([^"]*\)",.*/\1/p' kmod/knitk_main.c)
rules_n=$(awk '{ print $2 }' "$t/tokens" | sort -u | wc -l)
if [ "$rules_n" -eq 1 ] && [ "$(tok SUBSYSTEM ==)" = misc ] && [ -n "$name" ] &&
   [ "$(tok KERNEL ==)" = "$name" ]; then
	ok "one rule, matching SUBSYSTEM==\"misc\", KERNEL==\"$name\" (the module's miscdevice)"
else
	not_ok "one rule, matching SUBSYSTEM==\"misc\", KERNEL==\"$name\" ($rules_n rules)"
fi
group=$(tok GROUP =)
mode=$(tok MODE =)
others=$(awk '$4 != "==" && $3 != "GROUP" && $3 != "MODE" { print $3 }' "$t/tokens")
matches=$(awk '$4 == "==" && $3 != "SUBSYSTEM" && $3 != "KERNEL" { print $3 }' "$t/tokens")
if [ -n "$group" ] && [ -n "$mode" ] && [ -z "$others$matches" ] &&
   [ "$(wc -l <"$t/tokens")" -eq 4 ]; then
	ok "it assigns GROUP=\"$group\" MODE=\"$mode\" and nothing else"
else
	not_ok "it assigns GROUP and MODE only (also:" $others $matches ")"
fi

# The documents state the same group and mode.
doc_readme=$(tr '\n' ' ' <README.md |
	grep -o 'udev rule gives `/dev/knitk` to group `[a-z0-9_-]*`, mode [0-7]*' |
	sed 's/.*group `\([^`]*\)`, mode \([0-7]*\)/\1 \2/' | sort -u)
doc_man=$(mandoc -T ascii man/knitk.4 2>/dev/null | col -b | tr '\n' ' ' | tr -s ' ' |
	grep -o 'udev rule gives the node to group [a-z0-9_-]*, mode [0-7]*' |
	sed 's/.*group \([^,]*\), mode \([0-7]*\)/\1 \2/' | sort -u)
if [ "$doc_readme" = "$group $mode" ]; then
	ok "README.md documents group $group, mode $mode"
else
	not_ok "README.md documents group $group, mode $mode (it says: ${doc_readme:-nothing})"
fi
if [ "$doc_man" = "$group $mode" ]; then
	ok "knitk(4) documents group $group, mode $mode"
else
	not_ok "knitk(4) documents group $group, mode $mode (it says: ${doc_man:-nothing})"
fi

# udev's own reader, where it has one.
if udevadm verify --help >/dev/null 2>&1; then
	if out=$(udevadm verify --resolve-names=never "$rules" 2>&1); then
		ok "udevadm verify $rules"
	else
		printf '%s\n' "$out" | sed 's/^/# /'
		not_ok "udevadm verify $rules"
	fi
else
	ok "udevadm verify $rules # SKIP udevadm has no verify (systemd < 253)"
fi
exit "$failed"
