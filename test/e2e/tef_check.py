#!/usr/bin/env python3
"""tef_check.py FILE: the structural rules a Chrome trace (Trace Event Format,
JSON object form) must follow for viewers to show it as written, one line
per violation on stdout (nothing when it follows them all).

The rules are those of the Trace Event Format document and of the JSON
importers of Perfetto's trace processor (json_trace_parser) and of the
Catapult trace viewer, where those are stricter than the document:
  - every event has a known phase, integer pid and tid (Perfetto keeps
    them as 32-bit unsigned), a name, and a numeric ts (microseconds, not a
    string) but metadata, which has none;
  - complete events (X) have a numeric dur >= 0, and on each thread they
    nest: a slice that starts inside another ends inside it (Perfetto's
    slice tracker drops or truncates the ones that do not);
  - instant events (i, I) have a scope s of t, p or g;
  - counters (C) carry args whose every value is a number;
  - metadata (M): process_name / thread_name with a string args.name,
    process_labels with a string args.labels, *_sort_index with an integer
    args.sort_index; every process and thread with events is named;
  - flows (s, t, f; v1): each id has one start and one end, on threads, the
    end not before the start, the end binding to its enclosing slice
    (bp "e"), and each end of the flow inside a slice of its thread (the
    slice the arrow attaches to);
  - nestable async events (b, e) pair by (cat, id), the end not before the
    begin.
"""
import json
import sys
from collections import defaultdict

KNOWN = set("XBEiICMstfben")
META = {"process_name": ("name", str), "thread_name": ("name", str),
        "process_labels": ("labels", str), "process_sort_index": ("sort_index", int),
        "thread_sort_index": ("sort_index", int)}


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def ns(us):
    """Microseconds as integer ns: shimmer writes ns exactly (3 decimals),
    and ts + dur in floating point may pass the next slice's ts by an ulp."""
    return round(us * 1000)


def check(trace):
    bad = []
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents array"]
    unit = trace.get("displayTimeUnit")
    if unit is not None and unit not in ("ms", "ns"):
        bad.append("displayTimeUnit %r is neither ms nor ns" % unit)
    slices = defaultdict(list)   # (pid, tid) -> [(ts, end)]
    named_p, named_t, used_p, used_t = set(), set(), set(), set()
    flows = defaultdict(lambda: {"s": [], "f": [], "t": []})
    asyncs = defaultdict(lambda: {"b": [], "e": []})
    for i, e in enumerate(trace["traceEvents"]):
        where = "event %d (%s)" % (i, json.dumps(e)[:160])
        if not isinstance(e, dict):
            bad.append("%s: not an object" % where)
            continue
        ph = e.get("ph")
        if ph not in KNOWN:
            bad.append("%s: unknown phase %r" % (where, ph))
            continue
        ok = True
        for k in ("pid", "tid"):
            v = e.get(k)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 32:
                bad.append("%s: %s is not a 32-bit unsigned integer" % (where, k))
                ok = False
        if not isinstance(e.get("name"), str):
            bad.append("%s: no string name" % where)
        if ph != "M" and not number(e.get("ts")):
            bad.append("%s: ts is not a number" % where)
            ok = False
        if not ok:
            continue
        key = (e["pid"], e["tid"])
        if ph == "M":
            rule = META.get(e.get("name"))
            args = e.get("args")
            if rule is None:
                bad.append("%s: unknown metadata" % where)
            elif not isinstance(args, dict) or not isinstance(args.get(rule[0]), rule[1]) \
                    or isinstance(args.get(rule[0]), bool):
                bad.append("%s: args.%s is not a %s" % (where, rule[0], rule[1].__name__))
            elif e["name"] == "process_name":
                named_p.add(e["pid"])
            elif e["name"] == "thread_name":
                named_t.add(key)
            continue
        used_p.add(e["pid"])
        if ph == "X":
            if not number(e.get("dur")) or e["dur"] < 0:
                bad.append("%s: X without a numeric dur >= 0" % where)
                continue
            slices[key].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), i))
            used_t.add(key)
        elif ph in "BE":
            bad.append("%s: B/E (shimmer writes X)" % where)
        elif ph in "iI":
            if e.get("s", "t") not in ("t", "p", "g"):
                bad.append("%s: instant scope %r" % (where, e.get("s")))
            used_t.add(key)
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(number(v) for v in args.values()):
                bad.append("%s: counter args not all numbers" % where)
        elif ph in "stf":
            if "id" not in e or not isinstance(e.get("cat"), str):
                bad.append("%s: flow without id or cat" % where)
                continue
            if ph == "f" and e.get("bp") != "e":
                bad.append("%s: flow end not bound to its enclosing slice (bp e)" % where)
            flows[(e["cat"], e["name"], e["id"])][ph].append((key, e["ts"], where))
        elif ph in "be":
            if "id" not in e or not isinstance(e.get("cat"), str):
                bad.append("%s: async event without id or cat" % where)
                continue
            asyncs[(e["pid"], e["cat"], e["id"])][ph].append((e["ts"], where))
    # nesting, per thread
    for key, v in slices.items():
        v.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for ts, end, i in v:
            while stack and stack[-1][1] <= ts:
                stack.pop()
            if stack and end > stack[-1][1]:
                bad.append("pid %d tid %d: slice of event %d [%.3f, %.3f] overlaps event %d"
                           " [%.3f, %.3f] without nesting"
                           % (key + (i, ts / 1000, end / 1000, stack[-1][2], stack[-1][0] / 1000,
                                     stack[-1][1] / 1000)))
                continue
            stack.append((ts, end, i))

    def inside(key, ts):
        return any(a <= ns(ts) <= b for a, b, _ in slices.get(key, ()))
    for fid, f in flows.items():
        if len(f["s"]) != 1 or len(f["f"]) != 1:
            bad.append("flow %r: %d starts, %d ends" % (fid, len(f["s"]), len(f["f"])))
            continue
        (sk, sts, sw), (fk, fts, fw) = f["s"][0], f["f"][0]
        if fts < sts:
            bad.append("flow %r ends before it starts" % (fid,))
        if not inside(sk, sts):
            bad.append("%s: flow start inside no slice of its thread" % sw)
        if not inside(fk, fts):
            bad.append("%s: flow end inside no slice of its thread" % fw)
    for aid, a in asyncs.items():
        if len(a["b"]) != 1 or len(a["e"]) != 1:
            bad.append("async %r: %d begins, %d ends" % (aid, len(a["b"]), len(a["e"])))
        elif a["e"][0][0] < a["b"][0][0]:
            bad.append("async %r ends before it begins" % (aid,))
    for p in sorted(used_p - named_p):
        bad.append("process %d has events and no process_name" % p)
    for k in sorted(used_t - named_t):
        bad.append("pid %d tid %d has slices and no thread_name" % k)
    return bad


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        problems = check(json.load(f))
    for p in problems[:20]:
        print(p)
    if len(problems) > 20:
        print("... %d more" % (len(problems) - 20))
