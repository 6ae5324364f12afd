#!/usr/bin/env python3
"""pytruth_check.py: t_pytruth's comparison of shimmer's Python lines with
tracemalloc's, for the runs of pytruth_wl.py (read it first).

    pytruth_check.py LABEL SOURCE STORE TRUTH LEAKS CALLERS [SAMPLE_STORE
                     SAMPLE_LEAKS SAMPLE_BYTES]

STORE: the exact run's (SHIMMER_MALLOC=all); TRUTH: tracemalloc's snapshot
(TRUTH.child: the forked child's); LEAKS and CALLERS: `shimmer leaks STORE
--format csv`, and with `--callers 2`; SOURCE: pytruth_wl.py.  Prints one
"ok - t_pytruth: LABEL: CASE" or "not ok - ..." line per case, "#" lines
with the figures and differences; exits 1 when a case failed.

What is compared, and why not more (t_pytruth.sh has the reasons at length):

- blocks live at the end and allocated in the window (after the marker);
- the sh run's blocks whose innermost native frame (after the shim) is in
  no CPython image (the interpreter, libpython, an extension module) are
  left out: ld.so's dlopen, libc's own buffers, libsqlite3's pages are no
  Python allocation, and tracemalloc does not see them;
- tracemalloc's size 0 is 1 here: CPython's malloc-backed allocator asks
  malloc(1) for 0 bytes;
- sizes a CPython free list can hold (multiples of 8 up to 256: floats,
  tuples, lists, dicts, dict keys, slices) are compared per size over the
  whole window, not per line: tracemalloc names a block taken again from a
  free list by the line that took it (_PyTraceMalloc_NewReference), the shim
  sees only its malloc;
- every other block: per innermost line, per whole stack (cut as the shim
  cuts it: more than 32 frames keep the innermost 23, a gap and the
  outermost 8), and per call site as `shimmer leaks` names it, exactly.
"""
import collections
import csv
import json
import math
import os
import sqlite3
import sys

DEPTH, OUTER = 32, 8
MARK, MARK_CHILD = 1234567, 2345678
failed = False


def ok(label, case, good, details=()):
    global failed
    print("%s - t_pytruth: %s: %s" % ("ok" if good else "not ok", label, case))
    if not good:
        failed = True
        for d in list(details)[:20]:
            print("#   %s" % d)


def note(text):
    print("# %s" % text)


def free_list_size(size):
    return size % 8 == 0 and size <= 256


def library(path):
    """tools/sites.c's python_library_file()."""
    return (path is None or "/site-packages/" in path or "/dist-packages/" in path
            or "/lib/python3" in path or path.startswith("<frozen "))


def cut(frames):
    """The frames the shim keeps of a stack (innermost first); None is the gap."""
    if len(frames) <= DEPTH:
        return list(frames)
    return list(frames[:DEPTH - OUTER - 1]) + [None] + list(frames[-OUTER:])


def python_image(path):
    base = os.path.basename(path or "")
    return base.startswith("python3") or base.startswith("libpython3") or ".cpython-" in base


class Store:
    """The live blocks of one process of a store, with their stacks."""

    def __init__(self, path, child=False):
        self.con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        q = self.con.execute
        mark = MARK_CHILD if child else MARK
        row = q("SELECT proc_id, alloc_ns FROM allocations WHERE size = ?", (mark,)).fetchone()
        self.ok = row is not None
        if not self.ok:
            return
        self.proc, start = row
        self.text = dict(q("SELECT id, text FROM strings WHERE proc_id = ?", (self.proc,)))
        self.mods = q("SELECT m.lo, m.hi, s.text FROM modules m JOIN strings s ON "
                      "s.proc_id = m.proc_id AND s.id = m.path_id WHERE m.proc_id = ?",
                      (self.proc,)).fetchall()
        self.nodes = dict((n, pc) for n, pc in q(
            "SELECT node_id, pc FROM stack_nodes WHERE proc_id = ?", (self.proc,)))
        self.stacks = dict(q("SELECT stack_id, node_id FROM stacks WHERE proc_id = ?",
                             (self.proc,)))
        self.py = collections.defaultdict(list)
        for sid, fid, fn, line in q("SELECT pystack_id, file_id, func_id, line FROM python_frames "
                                    "WHERE proc_id = ? ORDER BY pystack_id, level", (self.proc,)):
            self.py[sid].append(None if fid == 0 and fn == 0 and line == 0
                                else (self.text.get(fid), self.text.get(fn), line))
        self.blocks, self.native = [], collections.Counter()
        self.all_live = []
        for size, weight, sid, pid, ns in q(
                "SELECT size, weight, stack_id, pystack_id, alloc_ns FROM allocations "
                "WHERE proc_id = ? AND space = 'host' AND free_ns IS NULL", (self.proc,)):
            frames = self.py.get(pid) if pid is not None else None
            self.all_live.append((size, weight, frames))
            if ns <= start or size == mark:
                continue
            caller = self.caller(sid)
            if not python_image(caller):
                self.native[os.path.basename(caller or "(no stack)")] += 1
                continue
            self.blocks.append((size, weight, frames))

    def caller(self, sid):
        pc = self.nodes.get(self.stacks.get(sid))
        if pc is None:
            return None
        for lo, hi, path in self.mods:
            if lo <= pc < hi:
                return path
        return None


def read_truth(path):
    """tracemalloc's blocks but those tracemalloc.py's own lines made (the
    snapshot's list of traces, before it copied them)."""
    blocks = []
    with open(path) as f:
        for line in f:
            c, size, tb = json.loads(line)
            if tb and os.path.basename(tb[0][0]) == "tracemalloc.py":
                continue
            tb = [tuple(x) for x in tb]
            blocks.extend([(size or 1, tb)] * c)
    return blocks


class Source:
    """pytruth_wl.py's functions by line: which workload a stack ran."""

    def __init__(self, path):
        self.path = os.path.realpath(path)
        self.by_line = collections.defaultdict(set)
        with open(path, "rb") as f:
            self.walk(compile(f.read(), path, "exec"))

    def walk(self, code):
        for _, _, line in code.co_lines():
            if line is not None:
                self.by_line[line].add(code.co_qualname)
        for k in code.co_consts:
            if hasattr(k, "co_lines"):
                self.walk(k)

    def workload(self, places, memo={}, real={}):
        """places: (file, line) innermost first."""
        key = tuple(places)
        if key not in memo:
            memo[key] = "(none)"
            for file, line in reversed(key):
                if file not in real:
                    real[file] = file is not None and os.path.realpath(file) == self.path
                if real[file]:
                    w = [q for q in self.by_line.get(line, ()) if q.startswith("wl_")]
                    if w:
                        memo[key] = w[0].split(".")[0]
                        break
        return memo[key]


def code_lines(path, cache={}):
    """Qualified names of the code objects of a file by line; None without
    the source."""
    if path in cache:
        return cache[path]
    src = path
    if path.startswith("<frozen ") and path.endswith(">"):
        import sysconfig
        src = os.path.join(sysconfig.get_paths()["stdlib"], path[8:-1].replace(".", "/") + ".py")
    m = None
    try:
        with open(src, "rb") as f:
            top = compile(f.read(), path, "exec", dont_inherit=True)
        m = collections.defaultdict(set)
        stack = [top]
        while stack:
            c = stack.pop()
            m[c.co_firstlineno].add(c.co_qualname)
            for _, _, line in c.co_lines():
                m[0 if line is None else line].add(c.co_qualname)
            stack.extend(k for k in c.co_consts if hasattr(k, "co_lines"))
    except (OSError, SyntaxError, ValueError):
        m = None
    cache[path] = m
    return m


def shown_names(texts):
    """tools/sites.c's py_file_name(): the base name, or, where the store has
    several strings of that base name, as many last components of the path
    as tell them apart, the same count for each."""
    by_base = collections.defaultdict(set)
    for t in texts:
        by_base[t.rsplit("/", 1)[-1]].add(t)
    depth = {}

    def tail(path, n):
        parts = path.split("/")
        return path if n >= len(parts) else "/".join(parts[-n:])

    def name(file):
        base = file.rsplit("/", 1)[-1]
        if base not in depth:
            group, n = by_base[base] | {file}, 1
            while len({tail(p, n) for p in group}) < len(group):
                n += 1
            depth[base] = n
        return tail(file, depth[base])
    return name


def site_label(frames, name, callers=0):
    """What `shimmer leaks` names a Python stack: the innermost frame outside
    the library, else the innermost; then callers frames."""
    at = next((i for i, f in enumerate(frames) if f is not None and not library(f[0])), 0)
    out = []
    for f in frames[at:at + callers + 1]:
        # a name the shim could not announce is NULL, which the tools write "?"
        out.append("..." if f is None else "%s (%s:%d)" % (f[1] or "?", name(f[0]) if f[0] else "?",
                                                             f[2]))
    return " <- ".join(out)


def diff_table(a, b):
    """Keys whose (count, bytes) differ."""
    return [(k, a.get(k, (0, 0)), b.get(k, (0, 0))) for k in sorted(set(a) | set(b), key=str)
            if a.get(k, (0, 0)) != b.get(k, (0, 0))]


def tally(items):
    t = {}
    for k, size in items:
        c, b = t.get(k, (0, 0))
        t[k] = (c + 1, b + size)
    return t


def compare_blocks(label, what, sh, truth, src):
    """Per innermost line, per stack, and free-list sizes, shimmer's blocks
    (size, frames) against tracemalloc's (size, places)."""
    def inner(places):
        return places[0] if places else ("<no Python frame>", 0)

    sh_places = [(s, [(f[0], f[2]) if f else None for f in (fr or [])]) for s, fr in sh]
    tr_places = [(s, cut(tb)) for s, tb in truth]
    big_sh = [(s, p) for s, p in sh_places if not free_list_size(s)]
    big_tr = [(s, p) for s, p in tr_places if not free_list_size(s)]
    # per innermost line, per workload
    def line_key(p):
        return (src.workload([x for x in p if x]), inner(p))
    a = tally((line_key(p), s) for s, p in big_sh)
    b = tally((line_key(p), s) for s, p in big_tr)
    d = diff_table(a, b)
    ok(label, "%s: per innermost Python line, blocks of sizes no free list holds: count and bytes "
       "as tracemalloc's (%d lines)" % (what, len(set(a) | set(b))), not d,
       ["%s:%s (%s): shimmer %d blocks %d B, tracemalloc %d blocks %d B"
        % (k[1][0], k[1][1], k[0], x[0], x[1], y[0], y[1]) for k, x, y in d])
    per_wl = collections.defaultdict(lambda: [0, 0, 0, 0])
    bad = {k for k, _, _ in d}
    for k in set(a) | set(b):
        w = per_wl[k[0]]
        w[0] += 1
        w[1] += k not in bad
        w[2] += b.get(k, (0, 0))[1] if k not in bad else 0
        w[3] += b.get(k, (0, 0))[1]
    # free-list sizes: per size, per workload
    fa = tally((s, s) for s, p in sh_places if free_list_size(s))
    fb = tally((s, s) for s, p in tr_places if free_list_size(s))
    fd = diff_table(fa, fb)
    ok(label, "%s: blocks of free-list sizes: count per size as tracemalloc's (%d blocks, %d B)"
       % (what, sum(v[0] for v in fb.values()), sum(v[1] for v in fb.values())), not fd,
       ["%d B: shimmer %d blocks, tracemalloc %d" % (k, x[0], y[0]) for k, x, y in fd])
    # free-list sizes per workload: figures only (a block freed by one
    # workload is taken again by the next)
    wa = tally(((src.workload([x for x in p if x]), s), s) for s, p in sh_places if free_list_size(s))
    wb = tally(((src.workload([x for x in p if x]), s), s) for s, p in tr_places if free_list_size(s))
    for wl in sorted(per_wl):
        w = per_wl[wl]
        fl_t = sum(v[1] for k, v in wb.items() if k[0] == wl)
        fl_ok = sum(min(v[1], wa.get(k, (0, 0))[1]) for k, v in wb.items() if k[0] == wl)
        note("%s: %s %s: %d of %d lines agree, %d of %d B; free-list sizes %d of %d B on the "
             "same workload" % (label, what, wl, w[1], w[0], w[2], w[3], fl_ok, fl_t))
    # per whole stack
    sa = tally((tuple(p), s) for s, p in big_sh)
    sb = tally((tuple(p), s) for s, p in big_tr)
    sd = diff_table(sa, sb)
    ok(label, "%s: per whole Python stack (every frame's file and line, cut as the shim "
       "cuts it): as tracemalloc's (%d stacks)" % (what, len(set(sa) | set(sb))), not sd,
       ["%s: shimmer %s, tracemalloc %s" % (" < ".join("..." if x is None else "%s:%d" % x
                                                     for x in k[:6]), x, y) for k, x, y in sd])
    return big_sh, big_tr


def check_functions(label, store):
    bad, n, nosrc, unnamed = [], 0, set(), []
    seen = set()
    # A name the shim could not announce (the collector's socket full for
    # the millisecond the shim waits, or another thread announcing it for
    # longer) leaves the frame unnamed (NULL), never misnamed.  Under a
    # sanitizer, whose collector runs many times slower, a few such frames
    # are allowed (1 in 100); elsewhere none.
    slack = 0.01 if os.environ.get("SANITIZE") else 0
    for frames in store.py.values():
        for f in frames:
            if f is None or f in seen:
                continue
            seen.add(f)
            m = code_lines(f[0]) if f[0] else None
            if m is None:
                nosrc.add(f[0])
                continue
            n += 1
            if f[1] is None and slack and m.get(f[2]):
                unnamed.append("%s:%d unnamed" % (f[0], f[2]))
            elif f[1] not in m.get(f[2], ()):
                bad.append("%s:%d named %s; code there: %s" % (f[0], f[2], f[1],
                                                            sorted(m.get(f[2], ()))))
    if len(unnamed) > slack * n:
        bad += unnamed
    ok(label, "every stored frame's function is a code object of its file with an instruction "
       "on its line (%d frames; %d files without source; %d unnamed)"
       % (n, len(nosrc), len(unnamed)), n > 0 and not bad, bad)


def read_leaks(path, proc):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["memory"] != "host" or int(r["proc_id"]) != proc:
                continue
            c, b = rows.get(r["frame"], (0, 0.0))
            rows[r["frame"]] = (c + int(r["count"]), b + float(r["bytes"]))
    return rows


def check_tool(label, what, store, leaks_csv, callers, weighted):
    name = shown_names(store.text.values())
    want, labels = {}, {}
    for size, weight, frames in store.all_live:
        if not frames:
            continue
        if id(frames) not in labels:
            labels[id(frames)] = site_label(frames, name, callers)
        k = labels[id(frames)]
        c, b = want.get(k, (0, 0.0))
        # sampled: the estimated count, each row weight / size blocks
        want[k] = (c + (weight / size if weighted and size else 1), b + (weight if weighted else size))
    got = {k: v for k, v in read_leaks(leaks_csv, store.proc).items() if k in want or ".py:" in k}
    bad = [(k, got.get(k), want.get(k)) for k in sorted(set(got) | set(want))
           if got.get(k) is None or want.get(k) is None
           or abs(got[k][0] - want[k][0]) > (1 if weighted else 0)
           or abs(got[k][1] - want[k][1]) > (1 + 1e-6 * want[k][1] if weighted else 0)]
    ok(label, "%s: each Python site's count and bytes as the documented rule reads the stored "
       "stacks (%d sites)" % (what, len(want)), want and not bad,
       ["%s: leaks %s, rule %s" % x for x in bad])


def check_sites(label, big_sh, big_tr, store):
    """The site named from tracemalloc's full traceback by the same rule, by
    (file as shown, line): as the site of shimmer's stacks."""
    name = shown_names(store.text.values())

    def site(places):
        at = next((i for i, p in enumerate(places) if p is not None and not library(p[0])), 0)
        p = places[at] if places else None
        return "(none)" if p is None else "%s:%d" % (name(p[0]) if p[0] else "?", p[1])
    a = tally((site(p), s) for s, p in big_sh)
    b = tally((site(p), s) for s, p in big_tr)
    d = diff_table(a, b)
    ok(label, "call sites read from tracemalloc's full tracebacks by the documented rule: "
       "count and bytes as shimmer's (%d sites)" % len(set(a) | set(b)), not d,
       ["%s: shimmer %s, tracemalloc %s" % x for x in d])


def bernstein(var, top, alpha=1e-6):
    """The deviation a sum of independent centred terms, each within top and
    of total variance var, exceeds with probability at most alpha
    (Bernstein's inequality: P(|S| >= t) <= 2 exp(-t^2 / 2 / (var + top t / 3)))."""
    lg = math.log(2 / alpha)
    return top * lg / 3 + math.sqrt((top * lg / 3) ** 2 + 2 * var * lg)


def check_sample(label, sample, truth, mean):
    """Sample mode: the weighted estimates against tracemalloc's exact bytes.
    Each block is sampled on its own with p = 1 - exp(-size/mean) and
    weighs size/p, so an estimate is a sum of independent terms (size/p - size
    when sampled, -size when not): variance size^2 (1-p)/p each, none above
    size/p.  A line fails when its estimate is further from tracemalloc's
    bytes than Bernstein's bound for a chance of 1e-6: a line with few
    expected samples is no normal variable (one sample of a 500-byte line
    is 33 times its bytes at a mean of 16 KiB)."""
    est, var, top, exact = (collections.Counter() for _ in range(4))
    for size, weight, frames in sample.blocks:
        f = frames[0] if frames else None
        k = (f[0], f[2]) if f and not free_list_size(size) else "free-list sizes"
        est[k] += weight
    for size, tb in truth:
        k = tb[0] if tb and not free_list_size(size) else "free-list sizes"
        p = 1 - math.exp(-size / mean)
        exact[k] += size
        var[k] += size * size * (1 - p) / p
        top[k] = max(top[k], size / p)
    bad, lines = [], [k for k in set(est) | set(exact) if k != "free-list sizes"]
    for k in set(est) | set(exact):
        t = bernstein(var[k], top[k])
        if abs(est[k] - exact[k]) > t + 0.5:
            bad.append("%s: estimate %.0f B, tracemalloc %d B, bound %.0f B"
                       % (k, est[k], exact[k], t))
    ok(label, "sample mode: each line's estimate (and that of the free-list sizes together) "
       "within Bernstein's 1e-6 bound of tracemalloc's bytes (%d lines)" % len(lines),
       lines and not bad, bad)
    tot_e, tot_x, tot_v = sum(est.values()), sum(exact.values()), sum(var.values())
    note("%s: sample mode: %.0f B estimated of %d B, %.2f sd" % (label, tot_e, tot_x,
                                                               abs(tot_e - tot_x) / math.sqrt(tot_v)))


def main(argv):
    label, source, store_path, truth_path, leaks, callers = argv[1:7]
    src = Source(source)
    store = Store(store_path)
    ok(label, "the exact run's marker is in the store", store.ok)
    if not store.ok:
        return 1
    drops = store.con.execute("SELECT reason, sum(events) FROM drops GROUP BY reason").fetchall()
    ok(label, "nothing dropped or refused (a refused stack hides the native caller)", not drops,
       ["%s: %s" % d for d in drops])
    note("%s: left out as native (no CPython image calls malloc): %s"
         % (label, dict(store.native) or "none"))
    truth = read_truth(truth_path)
    big_sh, big_tr = compare_blocks(label, "parent", [(s, f) for s, _, f in store.blocks],
                                    truth, src)
    check_sites(label, big_sh, big_tr, store)
    child = Store(store_path, child=True)
    ok(label, "the forked child's marker is in the store", child.ok)
    if child.ok:
        compare_blocks(label, "forked child", [(s, f) for s, _, f in child.blocks],
                       read_truth(truth_path + ".child"), src)
    check_functions(label, store)
    check_tool(label, "leaks", store, leaks, 0, False)
    check_tool(label, "leaks --callers 2", store, callers, 2, False)
    if len(argv) > 7:
        sample_path, sample_leaks, mean = argv[7], argv[8], float(argv[9])
        sample = Store(sample_path)
        ok(label, "the sample run's marker is in the store", sample.ok)
        if sample.ok:
            check_sample(label, sample, truth, mean)
            check_tool(label, "sample mode: leaks", sample, sample_leaks, 0, True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
