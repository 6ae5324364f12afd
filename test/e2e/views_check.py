#!/usr/bin/env python3
"""views_check.py ROOT STORE...: every SQL example of docs/schema.md and
README.md, run on each STORE (read-only), must run, and in work linear in
the store's size: SQLite's virtual machine instructions (counted with its
progress handler, the same on any machine whatever the load) at most
BUDGET_PER_ROW times the rows of the store's tables, plus a constant.  A
documented query that is quadratic in a table (a search of every earlier
row for each row) passes on a small store and takes hours on a user's:
the test's stores are large enough for such a query to exceed the budget
by far.

Prints one line per failure (nothing when all pass) and, on stderr, how
many examples and stores it ran, so that the test can tell an empty answer
from an empty check.

views_check.py --example TITLE ROOT prints the one example whose title
(its comment's first line, or its first line) starts with TITLE;
views_truth.py imports example() to check what the examples give.
"""
import re
import sqlite3
import sys

BUDGET_PER_ROW = 2000
BUDGET_BASE = 2000000


def examples(root):
    """(title, sql) of each example: the ```sql blocks of docs/schema.md
    split into statements (the title is the comment above each), its
    indented SELECT/WITH blocks, and README.md's sqlite3 command lines."""
    doc = open(root + '/docs/schema.md').read()
    readme = open(root + '/README.md').read()
    out = []
    for m in re.finditer(r'```sql\n(.*?)```', doc, re.S):
        cur = ''
        for line in m.group(1).splitlines(True):
            cur += line
            if sqlite3.complete_statement(cur):
                t = re.match(r'\s*--\s*(.*)', cur)
                out.append((t.group(1) if t else cur.split('\n')[0].strip(), cur.strip()))
                cur = ''
    for m in re.finditer(r'(?:^    .*\n)+', doc, re.M):
        b = re.sub(r'^    ', '', m.group(0), flags=re.M)
        if re.match(r'\s*(SELECT|WITH)\b', b):
            out.append((b.split('\n')[0].strip(), b.strip()))
    for m in re.finditer(r"sqlite3 \S+ '([^']*)'", readme):
        out.append(('README: ' + m.group(1)[:40], m.group(1)))
    return out


def example(root, title):
    got = [s for t, s in examples(root) if t.startswith(title)]
    if len(got) != 1:
        sys.exit('views_check.py: %d examples titled %r' % (len(got), title))
    return got[0]


def store_rows(db):
    n = 0
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                              " AND name NOT LIKE 'sqlite_%'").fetchall():
        n += db.execute('SELECT count(*) FROM "%s"' % name).fetchone()[0]
    return n


def run(db, sql, budget):
    """Rows of sql, or raises; instructions counted in thousands."""
    ticks = [0]

    def tick():
        ticks[0] += 1
        return 1 if ticks[0] * 1000 > budget else 0

    db.set_progress_handler(tick, 1000)
    try:
        # '?' parameters (a proc_id, a stack id, an index): 1
        code = re.sub(r'--[^\n]*', '', sql)
        rows = db.execute(sql, {'t0': 0, 't1': 1 << 62} if ':t0' in code else
                          (1,) * code.count('?')).fetchall()
    finally:
        db.set_progress_handler(None, 0)
    return rows, ticks[0] * 1000


def main():
    if sys.argv[1] == '--example':
        print(example(sys.argv[3], sys.argv[2]))
        return
    root, stores = sys.argv[1], sys.argv[2:]
    ex = examples(root)
    bad = []
    for path in stores:
        db = sqlite3.connect('file:%s?mode=ro' % path, uri=True)
        budget = BUDGET_BASE + BUDGET_PER_ROW * store_rows(db)
        for title, sql in ex:
            try:
                run(db, sql, budget)
            except sqlite3.OperationalError as e:
                if str(e) == 'interrupted':
                    bad.append('%s: "%s" took more than %d instructions (%d a row of the '
                               'store, and %d)' % (path.split('/')[-1], title, budget,
                                                   BUDGET_PER_ROW, BUDGET_BASE))
                else:
                    bad.append('%s: "%s": %s' % (path.split('/')[-1], title, e))
        db.close()
    print('\n'.join(bad))
    print('%d examples, %d stores' % (len(ex), len(stores)), file=sys.stderr)


if __name__ == '__main__':
    main()
