#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# Checks a knitk-bench --json file for shape and for every case moving its
# messages, never for speed.  Used by smoke.sh (host) and vm-bench.sh
# (guest).  Prints flat TAP lines "ok - bench[ TAG]: <property>".
#
#   check-json.py TAG BACKEND LIST JSON [TEXT] [SVG]
#
# LIST is the output of --list for the run, TEXT the run's stdout+stderr
# (progress lines included), SVG its --plot file.
import json, math, sys
import xml.etree.ElementTree as ET

tag, backend, list_path, json_path = sys.argv[1:5]
txt_path = sys.argv[5] if len(sys.argv) > 5 else None
svg_path = sys.argv[6] if len(sys.argv) > 6 else None
prefix = "bench" + (" " + tag if tag else "") + ": "
bad = 0

RATIOS = ["pingpong_spin_vs_raw_spin", "pingpong_park_vs_raw_futex",
          "batch_calls_vs_gthreadpool", "idle_wakes_per_call",
          "idle_spurious_wakes", "steal_skewed_vs_ideal",
          "steal_skewed_vs_private", "steal_skewed_vs_gthreadpool",
          "payload_1mib_vs_memcpy", "payload_1mib_loan_vs_memcpy",
          "pool_call_vs_lane_rtt",
          "park_cpu_vs_raw_futex", "death_wait_vs_pidfd_p50",
          "death_wait_vs_pidfd_p99", "death_wait_steal_vs_pidfd_p50",
          "death_wait_steal_vs_pidfd_p99", "pool_park_vs_raw_futex",
          "pool_park_cpu_vs_raw_futex", "death_notice_p99_us",
          "death_notice_missed", "steal_long_vs_ideal",
          "steal_long_vs_gthreadpool", "steal_spurious_wakes",
          "stream_8b_vs_pipe", "stream_8b_vs_eventfd",
          "stream_8b_oversub_vs_pipe", "stream_4k_vs_pipe"]
KMOD_RATIOS = ["kmod_park_vs_raw_futex", "kmod_pool_park_vs_raw_futex"]
# Ratios whose cases are all built: they must carry a number.
NEEDED = {"steal_skewed_vs_ideal", "steal_skewed_vs_private",
          "steal_skewed_vs_gthreadpool", "pingpong_spin_vs_raw_spin", "pingpong_park_vs_raw_futex",
          "batch_calls_vs_gthreadpool", "idle_wakes_per_call",
          "idle_spurious_wakes", "payload_1mib_vs_memcpy",
          "payload_1mib_loan_vs_memcpy", "pool_call_vs_lane_rtt", "park_cpu_vs_raw_futex",
          "death_wait_vs_pidfd_p50", "death_wait_vs_pidfd_p99",
          "death_wait_steal_vs_pidfd_p50", "death_wait_steal_vs_pidfd_p99",
          "pool_park_vs_raw_futex", "pool_park_cpu_vs_raw_futex",
          "death_notice_p99_us", "death_notice_missed",
          "steal_long_vs_ideal", "steal_long_vs_gthreadpool",
          "steal_spurious_wakes", "stream_8b_vs_pipe", "stream_8b_vs_eventfd",
          "stream_8b_oversub_vs_pipe", "stream_4k_vs_pipe"}


def check(cond, name, why=""):
    global bad
    if cond:
        print("ok - " + prefix + name)
    else:
        bad = 1
        print("not ok - " + prefix + name + (" (" + why + ")" if why else ""))


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
check(doc.get("backend") == backend, "backend reported as " + backend,
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

why = []
for n, c in cases.items():
    cpu = c.get("cpu_ns_per_op")
    if not c.get("ok"):
        continue
    if not isinstance(cpu, list) or len(cpu) != doc.get("reps") or \
       not all(fin(v) and v >= 0 for v in cpu) or not fin(c.get("median_cpu_ns")):
        why.append("%s: %r" % (n, cpu))
check(not why, "every case reports CPU time per op", "; ".join(why[:5]))

# Ratios: a row whose baseline ran carries one; the baseline row does not.
why = [n for n, c in cases.items() if c.get("ok") and c.get("baseline")
       and c["baseline"] != n and cases.get(c["baseline"], {}).get("ok")
       and "speed" not in c]
check(not why, "speed against the named baseline", ", ".join(why))

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

# The stealing rows: every call counted, calls per claim from the library.
why = []
for n, c in cases.items():
    if not (c.get("ok") and n.split("/")[-1].startswith("steal-")):
        continue
    pc = c.get("pool_counts") or {}
    if pc.get("calls") != c.get("ops_per_rep", 0) * doc.get("reps", 0) or \
       not (fin(pc.get("calls_per_claim")) and pc["calls_per_claim"] >= 1):
        why.append("%s: %r" % (n, pc))
check(not why, "stealing rows report calls per claim", "; ".join(why[:5]))

# The death-wait and death-notice rows: p50 and p99 over every kill of the run.
why = []
for n, c in cases.items():
    if not (c.get("ok") and n.startswith(("death-wait/", "death-notice/"))):
        continue
    lat = c.get("latency_us") or {}
    if lat.get("ops") != c.get("ops_per_rep", 0) * doc.get("reps", 0) or \
       not (fin(lat.get("p50")) and fin(lat.get("p99")) and
            0 < lat["p50"] <= lat["p99"]):
        why.append("%s: %r" % (n, lat))
check(not why, "death-wait and death-notice rows report p50 and p99 over every kill",
      "; ".join(why[:5]))

idle = [c for c in cases.values() if "idle" in c]
check(len(idle) == 1 and idle[0]["idle"].get("idle_workers") == 7 and
      idle[0]["idle"].get("idle_wakes") == 0,
      "idle workers received 0 wakes",
      str([c.get("idle") for c in idle]))
check(idle and fin(idle[0]["idle"].get("cpu_ns")) and
      idle[0]["idle"]["cpu_ns"] >= 0 and idle[0]["idle"].get("wall_ns", 0) > 0
      and idle[0]["idle"].get("settle_ns", 0) >= 1e6,
      "idle CPU time measured from 1 ms after the last call")

ratios = doc.get("ratios")
# A death no survivor saw is a defect, not a speed: none may be missed.
if isinstance(ratios, dict) and "death_notice_missed" in ratios:
    check(ratios["death_notice_missed"] == 0, "no death missed (death_notice_missed 0)",
          repr(ratios["death_notice_missed"]))
want = RATIOS + (KMOD_RATIOS if backend == "kmod" else [])
check(isinstance(ratios, dict) and sorted(ratios) == sorted(want),
      "ratios has exactly the expected keys",
      "got %s" % (sorted(ratios) if isinstance(ratios, dict) else ratios))
if isinstance(ratios, dict):
    need = NEEDED | (set(KMOD_RATIOS) if backend == "kmod" else set())
    why = ["%s: %r" % (k, v) for k, v in ratios.items()
           if (v is not None and not (fin(v) and v >= 0)) or
              (k in need and v is None)]
    check(not why, "ratios are numbers (null only for a case not built)",
          "; ".join(why))

runs = doc.get("runs")
check(isinstance(runs, int) and runs >= 1, "runs is the number of whole runs",
      repr(runs))
if isinstance(runs, int) and runs > 1:
    spread = doc.get("ratios_spread")
    why = []
    if not isinstance(spread, dict) or sorted(spread) != sorted(want):
        why.append("keys %r" % (sorted(spread) if isinstance(spread, dict) else spread))
    else:
        for k, v in spread.items():
            if v is None:
                if ratios.get(k) is not None:
                    why.append("%s: null beside %r" % (k, ratios.get(k)))
            elif not (isinstance(v, list) and len(v) == 3 and all(fin(x) for x in v)
                      and v[0] <= v[1] <= v[2] and v[1] == ratios.get(k)):
                why.append("%s: %r" % (k, v))
    check(not why, "ratios_spread: [min, median, max] per key, the median the ratio's",
          "; ".join(why))

if txt_path:
    txt = open(txt_path).read()
    check(all(n in txt for n in names), "table lists every case")
    # Interleaving: progress line k names case (k - 1) mod (number of cases).
    seq = [l.split(": ", 2)[2].strip() for l in txt.splitlines()
           if l.startswith("knitk-bench: case ")]
    order = [names[i % len(names)] for i in range(len(names) * doc.get("reps", 0))]
    check(seq == order, "repetitions interleaved across cases (A B A B)",
          "%d progress lines" % len(seq))
if svg_path:
    try:
        root = ET.parse(svg_path).getroot()
        check(root.tag.endswith("svg") and len(root) > len(names), "plot is SVG")
        text = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
        check("round-trip latency" in text and "makespan per load shape" in text,
              "plot has latency percentiles per method and makespan per shape")
    except Exception as e:
        check(False, "plot is SVG", str(e))
sys.exit(bad)
