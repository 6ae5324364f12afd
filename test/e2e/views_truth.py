#!/usr/bin/env python3
"""views_truth.py ROOT KEY=PATH...: what docs/schema.md's examples and the
store's views give, on the stores t_views.sh recorded, against the
workloads' own logs and what the shimmer commands say of the same store.

Prints "CASE|problem" lines (none when all agree), and on stderr "ran
CASE" for each case it checked (an example over views_check.py's budget
ends its group of cases with one line), so that the test can tell a case that
agreed from one that never ran.  Stores are read with their views as
recorded (the collector's schema).

KEY=PATH: gpu (wl_gpu kernels, SHIMMER_GPU=all, SHIMMER_GPU_SYNC=1) with
gpu_log and gpu_summary (shimmer summary --format csv); nvtx (wl_gpu
nvtx) with nvtx_log; ranges (wl_gpu ranges N, SHIMMER_HEAP_ROWS=both)
with ranges_n; heap (wl trace, SHIMMER_HEAP_ROWS=both) with heap_leaks
(shimmer leaks --format json); py (a Python loop of SHIMMER_MALLOC=all)
with py_allocs (shimmer allocations --format csv); stacks (manystacks
16 keep) with stacks_leaks.
"""
import csv
import json
import sqlite3
import sys

import views_check
from views_check import example


class OverBudget(Exception):
    pass


def say(case, msg):
    print('%s|%s' % (case, msg), flush=True)


def q(db, sql, params=()):
    """sql's rows, in the work views_check.py allows the store: a query
    that would run for hours on the old views stops, as a failure."""
    ticks = [0]
    budget = views_check.BUDGET_BASE + views_check.BUDGET_PER_ROW * db.rows

    def tick():
        ticks[0] += 1
        return 1 if ticks[0] * 1000 > budget else 0

    db.set_progress_handler(tick, 1000)
    try:
        return db.execute(sql, params).fetchall()
    except sqlite3.OperationalError as e:
        if str(e) == 'interrupted':
            raise OverBudget()
        raise
    finally:
        db.set_progress_handler(None, 0)


def ran(case):
    print('ran ' + case, file=sys.stderr)


class Store(sqlite3.Connection):
    rows = 0


def connect(path):
    db = sqlite3.connect('file:%s?mode=ro' % path, uri=True, factory=Store)
    db.rows = views_check.store_rows(db)
    return db


def log_lines(path, kind):
    return [line.rstrip('\n').split(',') for line in open(path) if line.startswith(kind + ',')]


def gpu(root, a):
    db = connect(a['gpu'])
    summary = list(csv.DictReader(open(a['gpu_summary'])))

    case = 'time spent in each CUDA function: shimmer summary\'s'
    got = {r[0]: (r[1], r[2]) for r in q(db, example(root, 'time spent in each CUDA'))}
    want = {r['event']: (int(r['count']), int(r['total_ns']) / 1e6) for r in summary
            if r['kind'] == 'api'}
    if not want:
        say(case, 'summary has no api rows')
    for fn in set(got) | set(want):
        g, w = got.get(fn), want.get(fn)
        if not g or not w or g[0] != w[0] or abs(g[1] - w[1]) > 1e-6:
            say(case, '%s: example %s, summary %s' % (fn, g, w))
    ran(case)

    case = 'top kernels by GPU time: shimmer summary\'s, the log\'s launches'
    got = {r[0]: (r[1], r[2]) for r in q(db, example(root, 'top kernels by GPU time'))}
    want = {r['event']: (int(r['count']), int(r['total_ns']) / 1e6) for r in summary
            if r['kind'] == 'kernel'}
    launches = len(log_lines(a['gpu_log'], 'K'))
    if sum(n for n, _ in got.values()) != launches:
        say(case, 'example %d launches, log %d' % (sum(n for n, _ in got.values()), launches))
    for k in set(got) | set(want):
        g, w = got.get(k), want.get(k)
        if not g or not w or g[0] != w[0] or abs(g[1] - w[1]) > 1e-6:
            say(case, '%s: example %s, summary %s' % (k[:40], g, w))
    ran(case)

    case = 'copies by kind and memory: the log\'s'
    got = {r[0]: (r[3], round(r[4] * 1e9)) for r in
           q(db, example(root, 'copies by kind and memory'))}
    want = {}
    for y in log_lines(a['gpu_log'], 'Y'):
        if y[3] == 'memcpy':
            n, b = want.get(y[5], (0, 0))
            want[y[5]] = (n + 1, b + int(y[4]))
    if got != want or not want:
        say(case, 'example %s, log %s' % (got, want))
    ran(case)

    case = 'time the CPU spent waiting on the GPU: the log\'s syncs'
    got = {r[0]: r[1] for r in q(db, example(root, 'time the CPU spent waiting'))}
    want = {}
    for s in log_lines(a['gpu_log'], 'S'):
        want[s[3]] = want.get(s[3], 0) + 1
    if got != want or not want:
        say(case, 'example %s, log %s' % (got, want))
    ran(case)

    case = 'the object of every frame of every stack'
    sql = example(root, 'the object, and the address within its file')
    sql = sql.replace('f.proc_id = 1 AND f.stack_id = 7', 'f.proc_id = ?1 AND f.stack_id = ?2')
    for path in (a['gpu'], a['heap'], a['py']):
        d = connect(path)
        n = 0
        for p, s in d.execute('SELECT proc_id, stack_id FROM stacks').fetchall():
            for row in q(d, sql, (p, s)):
                n += 1
                if row[2] is None:
                    say(case, '%s: proc %d stack %d level %d: no object' % (
                        path.split('/')[-1], p, s, row[0]))
        if not n:
            say(case, '%s: no frames' % path.split('/')[-1])
    ran(case)


def nvtx(root, a):
    db = connect(a['nvtx'])
    case = 'GPU time per NVTX range: the log\'s innermost ranges'
    got = {r[0]: r[1] for r in q(db, example(root, 'GPU time per NVTX range'))}
    want = {}
    for k in log_lines(a['nvtx_log'], 'K'):
        if k[16] != '-':
            want[k[16]] = want.get(k[16], 0) + 1
    if got != want or not want:
        say(case, 'example %s, log %s' % (got, want))
    ran(case)

    case = 'kernels launched within each range: the log\'s'
    sql = example(root, "kernels launched within each 'step' range")
    kernels = log_lines(a['nvtx_log'], 'K')
    for r in log_lines(a['nvtx_log'], 'R'):
        if r[3] != 'push':
            continue
        t0, t1 = int(r[8]), int(r[9])
        # every launch whose call lies inside the range's, on its thread
        want = sum(1 for k in kernels if k[2] == r[2] and int(k[14]) > t0 and int(k[15]) < t1)
        got = q(db, sql.replace("'step'", "'%s'" % r[5]))
        got = sum(row[1] for row in got)
        if got != want:
            say(case, '%s: example %d kernels, log %d' % (r[5], got, want))
    ran(case)

    db = connect(a['ranges'])
    n = int(a['ranges_n'])
    got = q(db, sql)
    if len(got) != n or any(row[1] != 1 for row in got):
        say(case, 'wl_gpu ranges %d: %d steps, kernels %s' % (
            n, len(got), sorted({row[1] for row in got})))


def heap(root, a):
    """The aggregated heap against the rows of the same events (both)."""
    for key in ('heap', 'ranges'):
        db = connect(a[key])
        name = a[key].split('/')[-1]
        db.execute('''CREATE TEMP VIEW h AS SELECT proc_id, size, alloc_ns, free_ns,
            coalesce(stack_id, 0) AS stack_id, coalesce(pystack_id, 0) AS pystack_id
            FROM allocations WHERE space = 'host' ''')
        case = 'heap_totals and heap_sites: the rows\''
        for row in db.execute('''
            WITH r AS (SELECT proc_id, count(*) AS allocs, sum(size) AS alloc_bytes,
                    count(free_ns) AS frees, total(CASE WHEN free_ns IS NOT NULL THEN size END)
                    AS freed_bytes, sum(free_ns IS NULL) AS live_count,
                    total(CASE WHEN free_ns IS NULL THEN size END) AS live_bytes,
                    coalesce(sum(free_ns - alloc_ns <= 1000000), 0) AS short_count
                    FROM h GROUP BY proc_id),
            ev AS (SELECT proc_id, alloc_ns AS t, size AS d FROM h
                UNION ALL SELECT proc_id, free_ns, -size FROM h WHERE free_ns IS NOT NULL),
            inst AS (SELECT proc_id, t, sum(d) AS d FROM ev GROUP BY 1, 2),
            run AS (SELECT proc_id, t, sum(d) OVER (PARTITION BY proc_id ORDER BY t) AS live
                FROM inst),
            pk AS (SELECT proc_id, max(live) AS peak FROM run GROUP BY 1),
            pkt AS (SELECT r.proc_id, min(r.t) AS peak_ns FROM run r JOIN pk USING (proc_id)
                WHERE r.live = pk.peak GROUP BY 1)
            SELECT t.proc_id, t.allocs, r.allocs, t.alloc_bytes, r.alloc_bytes, t.frees, r.frees,
                t.freed_bytes, r.freed_bytes, t.live_count, r.live_count, t.live_bytes,
                r.live_bytes, t.short_count, r.short_count, t.peak_bytes, pk.peak, t.peak_ns,
                pkt.peak_ns, (SELECT sum(peak_bytes) FROM heap_sites s
                    WHERE s.proc_id = t.proc_id), (SELECT sum(allocs) FROM heap_sites s
                    WHERE s.proc_id = t.proc_id)
            FROM heap_totals t JOIN r USING (proc_id) JOIN pk USING (proc_id)
            JOIN pkt USING (proc_id)'''):
            got, want = row[1:19:2], row[2:20:2]
            if got != want or row[19] != row[15] or row[20] != row[1]:
                say(case, '%s proc %d: totals %s, rows %s, sites peak %s allocs %s' % (
                    name, row[0], got, want, row[19], row[20]))
        if not db.execute('SELECT count(*) FROM heap_totals').fetchone()[0]:
            say(case, '%s: no heap_totals' % name)
        ran(case)

        case = 'heap_sizes and heap_lifetimes: the rows\''
        for kind, view, lo, hi, val, where in (
                ('size', 'heap_sizes', 'lo_bytes', 'hi_bytes', 'size', 'TRUE'),
                ('life', 'heap_lifetimes', 'lo_ns', 'hi_ns', 'free_ns - alloc_ns',
                 'free_ns IS NOT NULL AND free_ns - alloc_ns <= 1000000000')):
            for row in db.execute('''
                WITH v AS (SELECT proc_id, %s AS lo, %s AS hi, sum(count) AS c,
                        sum(bytes) AS b FROM %s GROUP BY 1, 2, 3),
                r AS (SELECT v.proc_id, v.lo, (SELECT count(*) FROM h WHERE h.proc_id =
                        v.proc_id AND %s AND %s BETWEEN v.lo AND v.hi) AS c,
                    (SELECT total(size) FROM h WHERE h.proc_id = v.proc_id AND %s AND
                        %s BETWEEN v.lo AND v.hi) AS b FROM v)
                SELECT v.proc_id, v.lo, v.hi, v.c, r.c, v.b, r.b FROM v JOIN r
                USING (proc_id, lo) WHERE v.c <> r.c OR v.b <> r.b
                UNION ALL SELECT proc_id, -1, -1, (SELECT sum(count) FROM %s v
                    WHERE v.proc_id = t.proc_id), (SELECT count(*) FROM h
                    WHERE h.proc_id = t.proc_id AND %s), 0, 0 FROM heap_totals t
                WHERE (SELECT sum(count) FROM %s v WHERE v.proc_id = t.proc_id) IS NOT
                    (SELECT nullif(count(*), 0) FROM h WHERE h.proc_id = t.proc_id AND %s)'''
                    % (lo, hi, view, where, val, where, val, view, where, view, where)):
                say(case, '%s %s proc %d [%d, %d]: view %d blocks %d bytes, rows %d, %d' % (
                    name, view, row[0], row[1], row[2], row[3], row[5], row[4], row[6]))
        ran(case)

        case = 'heap_series at each checkpoint: the rows\' live bytes'
        n = 0
        for kind, table in (('alloc', 'heap_points'), ('step', 'heap_steps')):
            sql = example(root, 'SELECT bytes FROM heap_series')
            assert "kind = 'step'" in sql
            sql = sql.replace("kind = 'step'", "kind = '%s'" % kind)
            for p, idx, ns in db.execute('SELECT proc_id, idx, ns FROM %s' % table).fetchall():
                for s, ps in db.execute('SELECT stack_id, pystack_id FROM heap_sites'
                                        ' WHERE proc_id = ?', (p,)).fetchall():
                    got = q(db, sql, (p, s, ps, idx))
                    got = got[0][0] if got else 0
                    want = db.execute('SELECT total(size) FROM h WHERE proc_id = ? AND'
                                      ' stack_id = ? AND pystack_id = ? AND alloc_ns <= ? AND'
                                      ' (free_ns IS NULL OR free_ns > ?)',
                                      (p, s, ps, ns, ns)).fetchone()[0]
                    n += 1
                    if got != want:
                        say(case, '%s proc %d site (%d, %d) %s %d: %d bytes, rows %d' % (
                            name, p, s, ps, kind, idx, got, want))
        if key == 'ranges' and not db.execute('SELECT count(*) FROM heap_steps').fetchone()[0]:
            say(case, '%s: no steps' % name)
        if not n:
            say(case, '%s: no checkpoint' % name)
        ran(case)

    db = connect(a['heap'])
    leaks = json.load(open(a['heap_leaks']))
    case = 'live host heap and its stacks: shimmer leaks\''
    live = dict(q(db, example(root, "estimated live host heap")))
    top = {}
    for p, s, b, frames in q(db, example(root, 'the native stacks that allocated')):
        top[p] = top.get(p, 0) + b
        if not frames:
            say(case, 'proc %d stack %s: no frames' % (p, s))
    for p in leaks['processes']:
        want = sum(s['bytes'] for s in p['sites'] if s['memory'] == 'host')
        if live.get(p['proc_id'], 0) != want or top.get(p['proc_id'], 0) != want:
            say(case, 'proc %d: live %s, top stacks %s, leaks %d' % (
                p['proc_id'], live.get(p['proc_id']), top.get(p['proc_id']), want))
    if not live:
        say(case, 'no live host heap')
    ran(case)


def py(root, a):
    db = connect(a['py'])
    case = 'bytes allocated per Python function: shimmer allocations\''
    got = {(r[1], r[2]): (r[3], r[4]) for r in
           q(db, example(root, 'bytes allocated per Python function'))}
    want = None
    for r in csv.DictReader(open(a['py_allocs'])):
        if r['memory'] == 'host' and r['frame'].startswith('churn ('):
            want = (int(r['count']), int(r['bytes']))
    # bytearray(n) asks for n + 1 bytes
    truth = (20000, sum(100001 + i for i in range(20000)))
    if got.get(('churn', 3)) != truth or want != truth:
        say(case, 'example %s, shimmer allocations %s, the loop %s' % (
            got.get(('churn', 3)), want, truth))
    ran(case)

    case = 'python_frames_named: every python_frames row'
    n = db.execute('SELECT count(*) FROM python_frames').fetchone()[0]
    m = db.execute('SELECT count(*) FROM python_frames_named').fetchone()[0]
    if n != m or not n:
        say(case, 'python_frames %d rows, python_frames_named %d' % (n, m))
    ran(case)


def stacks(root, a):
    db = connect(a['stacks'])
    case = 'was anything lost: shimmer leaks\''
    lost = q(db, example(root, "was anything lost?"))
    full = db.execute("SELECT sum(events) FROM drops WHERE reason = 'stack_full'").fetchone()[0]
    leaks = json.load(open(a['stacks_leaks']))
    dropped = sum(p['dropped_events'] for p in leaks['processes'])
    if lost or dropped or not full:
        say(case, 'example %s, leaks dropped %d, stack_full %s' % (lost, dropped, full))
    ran(case)


def main():
    root = sys.argv[1]
    a = dict(x.split('=', 1) for x in sys.argv[2:])
    for f in (gpu, nvtx, heap, py, stacks):
        try:
            f(root, a)
        except OverBudget:
            say(f.__name__, 'an example took more work than views_check.py allows')
            ran(f.__name__)


if __name__ == '__main__':
    main()
