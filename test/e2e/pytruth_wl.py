"""pytruth_wl.py: the Python workloads of t_pytruth, each run twice: once under
shimmer (PYTRUTH=sh), once under tracemalloc (PYTRUTH=tm), never both in one
process (tracemalloc's own tables are allocated through the same malloc).

    PYTRUTH=sh|tm PYTRUTH_OUT=FILE PYTRUTH_DIR=DIR python3 pytruth_wl.py

Both runs do the same thing, byte for byte, up to the end, where the tm run
writes tracemalloc's snapshot (one JSON line per distinct traceback and size:
[count, size, [[file, line], ...innermost first]]) to FILE and the sh run
exits at once (os._exit), so that shimmer's "live at the end" is the same
instant.  What makes the two runs agree (t_pytruth.sh says why each matters):

- PYTHONMALLOC=malloc, PYTHONHASHSEED=0, PYTHONDONTWRITEBYTECODE=1, and
  directories that do not change between the runs (DIR holds the modules);
- every module is imported before the window, except lazymod (import-time
  code), whose functions keep its file name alive;
- the window starts after gc.collect() (which empties CPython's free lists)
  with a marker, a block of 1234567 bytes from libc's malloc (the sh run's
  rows are those allocated after it); tracemalloc starts right after it;
- automatic garbage collection is off in the window, and a full collection
  and sys._clear_type_cache() (CPython's method cache holds attribute names
  by address: which ones survive differs between runs) end it;
- threads wait for each other before they allocate, and the main thread
  waits after join for their thread states to go.

The forked child has a window of its own: a marker of 2345678 bytes, then
tracemalloc's traces cleared; it writes FILE.child.
"""
import asyncio
import collections
import csv
import ctypes
import dataclasses
import functools
import gc
import io
import json
import os
import re
import sqlite3
import sys
import threading
import time
import tracemalloc

MODE = os.environ["PYTRUTH"]
OUT = os.environ["PYTRUTH_OUT"]
sys.path[1:1] = [os.environ["PYTRUTH_DIR"],
                 os.path.join(os.environ["PYTRUTH_DIR"], "lib", "site-packages")]
import deeplib  # noqa: E402  (a library, by its path: site-packages)
import pa.util  # noqa: E402  (pa/util.py and pb/util.py: one base name)
import pb.util  # noqa: E402

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
keep = []


def wl_json():
    doc = {"k%d" % i: [i, str(i) * 3, {"x": i / 7, "y": [None, True, "s" * (i % 13)]}]
           for i in range(3000)}
    text = json.dumps(doc)
    keep.append(text)
    keep.append(json.loads(text))


TEXT = "\n".join("user%d@example%d.org said: value=%d, ratio=%.3f; tags=[a%d,b%d]"
                 % (i, i % 7, i * 31, i / 13, i, i * 2) for i in range(2000))


def wl_re():
    pat = re.compile(r"(\w+)@(\w+)\.org said: value=(\d+), ratio=([\d.]+)")
    keep.append(pat.findall(TEXT))
    keep.append([m.groupdict() for m in re.finditer(r"value=(?P<v>\d+), r\w+=(?P<r>[\d.]+)", TEXT)])
    keep.append(re.sub(r"tags=\[(.*?)\]", lambda m: m.group(1).upper(), TEXT))
    keep.append(re.split(r"[;\n]", TEXT))


Point = collections.namedtuple("Point", "x y z")


def wl_collections():
    words = ("alpha beta gamma delta epsilon zeta eta theta iota kappa " * 1000).split()
    keep.append(collections.Counter(words))
    dd = collections.defaultdict(list)
    for i, w in enumerate(words):
        dd[w[:2]].append(i)
    keep.append(dd)
    dq = collections.deque(maxlen=3000)
    for i in range(10000):
        dq.append((i, str(i)))
    keep.append(dq)
    od = collections.OrderedDict()
    for i in range(2000):
        od["k%d" % i] = Point(i, i * 2, float(i))
        if i % 3 == 0:
            od.move_to_end("k%d" % (i // 2))
    keep.append(od)


def bfs(g, s):
    dist = {s: 0}
    frontier = [s]
    while frontier:
        nxt = []
        for u in frontier:
            for v in g[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    nxt.append(v)
        frontier = nxt
    return dist


def wl_algo():
    n = 10000
    g = {i: [(i * 7 + 1) % n, (i * 13 + 5) % n, (i + 1) % n] for i in range(n)}
    keep.append(g)
    keep.append(bfs(g, 0))
    a, b = "ACGTTGCA" * 20, "TGCATGCA" * 20
    prev, rows = [0] * (len(b) + 1), []
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else max(prev[j + 1], cur[j]))
        rows.append(cur)
        prev = cur
    keep.append(rows)
    keep.append(sorted(((i * 7919) % 10007, str(i)) for i in range(5000)))


def wl_csv():
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "name", "score", "note"])
    for i in range(3000):
        w.writerow([i, "name %d" % i, i * 1.5, 'he said "hi", %d' % i])
    text = buf.getvalue()
    keep.append(text)
    keep.append(list(csv.reader(io.StringIO(text))))
    keep.append(list(csv.DictReader(io.StringIO(text))))


def wl_sqlite():
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, v REAL)")
    con.executemany("INSERT INTO t (name, v) VALUES (?, ?)",
                    (("n%d" % i, i / 3) for i in range(3000)))
    con.commit()
    keep.append(con.execute("SELECT * FROM t WHERE v > 100 ORDER BY name").fetchall())
    keep.append([dict(zip(("n", "s"), r))
                 for r in con.execute("SELECT name, sum(v) FROM t GROUP BY id % 50")])
    keep.append(con)


def wl_threads():
    lock = threading.Lock()
    go = threading.Event()

    def work(k):
        go.wait()
        local = [str(i * k) for i in range(2000)]
        table = {s: len(s) for s in local}
        with lock:
            keep.append((k, local, table))

    ts = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in ts:
        t.start()
    go.set()
    for t in ts:
        t.join()
    time.sleep(0.2)


def numbers(n):
    for i in range(n):
        yield i


def squares(it):
    for x in it:
        yield x * x, str(x)


def chained(n):
    yield from squares(numbers(n))


def wl_generators():
    keep.append(list(chained(3000)))
    keep.append([s for _, s in squares(numbers(2000)) if len(s) > 2])
    keep.append({k: v for k, v in ((str(i), [i]) for i in range(1500))})
    keep.append(list(bytes(i % 256 for i in range(j)) for j in range(150)))


def logged(f):
    @functools.wraps(f)
    def wrap(*a, **k):
        return f(*a, **k)
    return wrap


@dataclasses.dataclass
class Item:
    name: str
    qty: int
    tags: list = dataclasses.field(default_factory=list)


class Base:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a
        self.b = [a] * 3


class Derived(Base):
    __slots__ = ("c",)

    def __init__(self, a):
        super().__init__(a)
        self.c = {"a": a}

    @property
    def total(self):
        return sum(self.b) + self.c["a"]


class Ctx:
    def __enter__(self):
        self.buf = []
        return self.buf

    def __exit__(self, *exc):
        keep.append(tuple(self.buf))
        return False


@logged
def make(i):
    return Item("item%d" % i, i, ["t%d" % (i % 5)])


def wl_classes():
    keep.append([make(i) for i in range(1500)])
    keep.append([Derived(i) for i in range(1500)])
    keep.append([d.total for d in keep[-1]])
    with Ctx() as buf:
        for i in range(800):
            buf.append("x" * (i % 50))
    errs = []
    for i in range(200):
        try:
            raise ValueError("bad %d" % i)
        except ValueError as e:
            errs.append(str(e))
    keep.append(errs)


def gen_stop(i):
    yield i
    raise StopIteration(i)  # RuntimeError, made where no line is


def wl_exceptions():
    for i in range(40):
        try:
            for _ in gen_stop(i):
                pass
        except RuntimeError as e:
            keep.append(e)


def down(n):
    if n == 0:
        return [bytearray(700)]
    r = down(n - 1)
    keep.append(bytearray(500 + n))
    return r


async def fetch(i):
    await asyncio.sleep(0)
    return {"id": i, "body": "x" * (100 + i % 50)}


async def gather_all():
    parts = await asyncio.gather(*(fetch(i) for i in range(300)))
    q = asyncio.Queue()
    for p in parts:
        await q.put(p)
    return [(await q.get())["body"] + "!" for _ in range(q.qsize())]


def wl_callbacks():
    # Python called back from C: a sort key, map, a JSON object hook, asyncio
    rows = [(str(i * 7919 % 1000), i) for i in range(2000)]
    keep.append(sorted(rows, key=lambda r: (len(r[0]), r[0] + "|")))
    keep.append(list(map(lambda r: r[0] * 3, rows)))
    keep.append(json.loads(json.dumps([{"a": i} for i in range(500)]),
                           object_hook=lambda d: [d["a"], str(d["a"])]))
    keep.append(asyncio.run(gather_all()))


def wl_deep():
    keep.append(down(60))  # the user's own recursion, deeper than kept
    deeplib.down(20, keep)  # a library's, shallower than kept
    deeplib.down(40, keep)  # deeper than kept: the outermost frames name it
    deeplib.down(600, keep)  # deeper than the shim walked before c0260d2


def wl_samename():
    for _ in range(10):
        pa.util.make(keep, 3000)
    for _ in range(5):
        pb.util.make(keep, 7000)


def wl_import():
    import lazymod  # its module-level code runs here
    keep.append(lazymod.TABLE)


def wl_fork():
    pid = os.fork()
    if pid == 0:
        gc.collect()
        libc.malloc(2345678)
        if MODE == "tm":
            tracemalloc.clear_traces()
        keep.append([bytearray(100 + i) for i in range(300)])
        wl_json()
        end(OUT + ".child")
    os.waitpid(pid, 0)


def end(out):
    gc.collect()
    sys._clear_type_cache()
    if MODE == "tm":
        snap = tracemalloc.take_snapshot()
        tracemalloc.stop()
        n = collections.Counter((size, tb) for _, size, tb, _ in snap.traces._traces)
        with open(out, "w") as f:
            for (size, tb), c in n.items():
                f.write(json.dumps([c, size, tb]) + "\n")
    os._exit(0)


WORKLOADS = [wl_json, wl_re, wl_collections, wl_algo, wl_csv, wl_sqlite, wl_threads,
             wl_generators, wl_classes, wl_exceptions, wl_callbacks, wl_deep, wl_samename,
             wl_import, wl_fork]

gc.disable()
gc.collect()
libc.malloc(1234567)
if MODE == "tm":
    tracemalloc.start(2000)
for wl in WORKLOADS:
    wl()
end(OUT)
