#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Smoke test of knitk-bench: builds it, runs "--quick --json" on the futex
# backend and checks structure and sanity, never speed: every case is
# there, every figure is positive and finite, the JSON parses, knitk cases
# moved exactly the messages asked, idle workers got no wake.  Prints flat
# TAP lines "ok - bench: <property>"; anything else starts with "# ".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
bench=$top/build/tools/knitk-bench
# Hang protection only (like lib/tests/run.sh), not a speed limit.
watchdog=${KNITK_TEST_WATCHDOG:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

if ! make -s -C "$top/tools" knitk-bench >"$tmp/build.log" 2>&1; then
	sed 's/^/# /' "$tmp/build.log"
	echo "not ok - bench: build"
	exit 1
fi
echo "ok - bench: build"

"$bench" --list >"$tmp/list" 2>&1 || failed=1
KNITK_BACKEND=futex timeout -s KILL "$watchdog" "$bench" --quick --json "$tmp/out.json" \
	--plot "$tmp/out.svg" >"$tmp/out.txt" 2>&1
rc=$?
sed 's/^/# /' "$tmp/out.txt"
if [ "$rc" -eq 137 ]; then
	echo "not ok - bench: killed by the ${watchdog}s watchdog (hang)"
	exit 1
elif [ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]; then
	echo "ok - bench: --quick run exits 0"
else
	echo "not ok - bench: --quick run exits 0 (status $rc)"
	failed=1
fi

python3 - "$tmp/list" "$tmp/out.json" "$tmp/out.txt" "$tmp/out.svg" <<'EOF' || failed=1
import json, math, sys
import xml.etree.ElementTree as ET

list_path, json_path, txt_path, svg_path = sys.argv[1:5]
bad = 0

def check(cond, name, why=""):
    global bad
    if cond:
        print("ok - bench: " + name)
    else:
        bad = 1
        print("not ok - bench: " + name + (" (" + why + ")" if why else ""))

def fin(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

names = [l.strip() for l in open(list_path) if l.strip()]
try:
    doc = json.load(open(json_path))
except Exception as e:
    check(False, "JSON parses", str(e))
    sys.exit(1)
check(True, "JSON parses")
cases = {c.get("name"): c for c in doc.get("cases", [])}
check(len(names) > 0 and sorted(cases) == sorted(names), "every case present",
      "missing %s" % sorted(set(names) - set(cases)))
check(doc.get("backend") == "futex", "backend reported as futex",
      str(doc.get("backend")))

failed = [n for n, c in cases.items() if not c.get("ok")]
check(not failed, "every case ran",
      "; ".join("%s: %s" % (n, cases[n].get("error")) for n in failed))

why = []
for n, c in cases.items():
    if not c.get("ok"):
        continue
    vals = list(c.get("ns_per_op", [])) + [c.get(k) for k in
            ("median_ns", "min_ns", "median", "best")]
    vals += list(c.get("speed_vs", {}).values())
    if "speed" in c:
        vals.append(c["speed"])
    if len(c.get("ns_per_op", [])) != doc.get("reps"):
        why.append("%s: %d reps" % (n, len(c.get("ns_per_op", []))))
    if not c.get("ops_per_rep", 0) > 0:
        why.append("%s: ops_per_rep" % n)
    for v in vals:
        if not (fin(v) and v > 0):
            why.append("%s: %r" % (n, v))
    if c.get("min_ns", 0) > c.get("median_ns", 0):
        why.append("%s: min > median" % n)
check(not why, "every value positive and finite", "; ".join(why[:5]))

# Ratios: a row whose baseline ran carries one; the baseline row does not.
why = [n for n, c in cases.items() if c.get("ok") and c.get("baseline")
       and c["baseline"] != n and cases.get(c["baseline"], {}).get("ok")
       and "speed" not in c]
check(not why, "ratios against the named baseline", ", ".join(why))

kn = [n for n, c in cases.items() if c.get("knitk")]
why = ["%s: %s of %s" % (n, cases[n].get("messages_moved"),
                         cases[n].get("messages_expected"))
       for n in kn if not (cases[n].get("messages_expected", 0) > 0 and
                           cases[n].get("messages_moved") ==
                           cases[n].get("messages_expected"))]
check(kn and not why, "knitk cases moved exactly the messages asked",
      "; ".join(why))
why = [n for n, c in cases.items() if "messages_expected" in c and
       c.get("messages_moved") != c.get("messages_expected")]
check(not why, "baselines moved exactly the messages asked", ", ".join(why))

idle = [c for c in cases.values() if "idle" in c]
check(len(idle) == 1 and idle[0]["idle"].get("idle_workers") == 7 and
      idle[0]["idle"].get("idle_wakes") == 0,
      "idle workers received 0 wakes",
      str([c.get("idle") for c in idle]))
check(idle and fin(idle[0]["idle"].get("cpu_ns")) and
      idle[0]["idle"]["cpu_ns"] >= 0 and idle[0]["idle"].get("wall_ns", 0) > 0,
      "idle CPU time measured")

txt = open(txt_path).read()
check(all(n in txt for n in names), "table lists every case")
try:
    root = ET.parse(svg_path).getroot()
    check(root.tag.endswith("svg") and len(root) > len(names), "plot is SVG")
except Exception as e:
    check(False, "plot is SVG", str(e))
sys.exit(bad)
EOF

# --only selects by substring and by glob.
for pat in "rtt-thread/knitk-busy" "tput-*/knitk"; do
	sel=$("$bench" --list --only "$pat" | tr '\n' ' ')
	case "$pat" in
	rtt-*) want="rtt-thread/knitk-busy " ;;
	*) want="tput-8B/knitk tput-4K/knitk " ;;
	esac
	if [ "$sel" = "$want" ]; then
		echo "ok - bench: --only '$pat'"
	else
		echo "not ok - bench: --only '$pat' selected '$sel'"
		failed=1
	fi
done
exit $failed
