#!/usr/bin/env python3
"""docs_check.py ROOT SHIMMER LIBSHIMMER STORE: what the binaries and a store
offer a user, against what README.md, docs/usage.md and docs/schema.md say.

Prints one line per thing the documentation misses (nothing when all is
documented) and, on stderr, how many things it checked of each kind, so
that the test can tell an empty answer from an empty check:

  - each option of `shimmer CMD --help` is in the synopsis of CMD's
    section ("## shimmer CMD") of docs/usage.md, and each option of that
    synopsis is in --help;
  - each SHIMMER_* name in libshimmer.so (the variables and the
    configuration file's keys the shim reads) is in README.md's table,
    and each one the shimmer command reads is in README.md or usage.md;
  - each table and view of STORE is named in docs/schema.md, and each
    column of a table is in the text of its section.
"""
import re
import sqlite3
import subprocess
import sys

COMMANDS = ['run', 'attach', 'summary', 'leaks', 'peak', 'temporary', 'allocations', 'ls',
            'ctl', 'compare', 'export', 'bottlenecks', 'report']
OPT = r'(?<![\w-])(--[a-z][a-z0-9-]*|-o)(?![\w-])'


def names_in(path):
    """The SHIMMER_* strings of a binary (what it can read)."""
    data = open(path, 'rb').read()
    return {m.decode() for m in
            re.findall(rb'(?<![\x20-\x7e])(SHIMMER_[A-Z0-9_]+)(?![\x20-\x7e])', data)}


def main():
    root, shimmer, lib, store = sys.argv[1:5]
    usage = open(root + '/docs/usage.md').read()
    readme = open(root + '/README.md').read()
    schema = open(root + '/docs/schema.md').read()
    bad, counts = [], {}

    sections = {m.group(1): m.group(2) for m in
                re.finditer(r'^## shimmer (\w+)\n(.*?)(?=^## |\Z)', usage, re.S | re.M)}
    n = 0
    for cmd in COMMANDS:
        out = subprocess.run([shimmer, cmd, '--help'], capture_output=True, text=True).stdout
        helped = set(re.findall(OPT, out)) - {'--help'}
        sec = sections.get(cmd)
        syn = re.match(r'\s*((?:    .*\n)+)', sec) if sec else None
        if not syn:
            bad.append('docs/usage.md: no section "## shimmer %s" opening with its synopsis' % cmd)
            continue
        synopsis = set(re.findall(OPT, syn.group(1)))
        n += len(helped)
        for o in sorted(helped - synopsis):
            bad.append('shimmer %s --help has %s; its synopsis in docs/usage.md does not' % (cmd, o))
        for o in sorted(synopsis - helped):
            bad.append('docs/usage.md: shimmer %s %s is not in its --help' % (cmd, o))
    counts['options'] = n

    env_rows = set(re.findall(r'^\| `(SHIMMER_[A-Z0-9_]+)` \|', readme, re.M))
    shim = names_in(lib)
    counts['shim variables'] = len(shim)
    for v in sorted(shim - env_rows):
        # the configuration file's path: told in SHIMMER_SOCKET's row
        if v == 'SHIMMER_CONFIG' and '`SHIMMER_CONFIG`' in readme:
            continue
        bad.append('libshimmer.so reads %s; README.md\'s table of variables does not have it' % v)
    tool = names_in(shimmer)
    counts['shimmer variables'] = len(tool)
    for v in sorted(tool):
        if '`%s`' % v not in readme and '`%s`' % v not in usage and v + '=' not in usage:
            bad.append('shimmer reads %s; neither README.md nor docs/usage.md says so' % v)

    heads = {}
    cur = None
    for line in schema.splitlines():
        m = re.match(r'#+ (.*)', line)
        if m:
            cur = m.group(1)
            heads[cur] = ''
        elif cur:
            heads[cur] += line + '\n'
    db = sqlite3.connect('file:%s?mode=ro' % store, uri=True)
    objs = db.execute("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view')"
                      " AND name NOT LIKE 'sqlite_%'").fetchall()
    counts['tables and views'] = len(objs)
    ncols = 0
    for typ, name in objs:
        word = r'(?<![\w])' + re.escape(name) + r'(?![\w])'
        own = [t for h, t in heads.items() if re.search(word, h)]
        if not own and not re.search('`' + re.escape(name) + '`', schema):
            bad.append('docs/schema.md does not name the %s %s' % (typ, name))
            continue
        if typ != 'table' or not own:
            continue
        text = '\n'.join(own)
        for (col,) in db.execute('SELECT name FROM pragma_table_info(?)', (name,)):
            ncols += 1
            # grid_y is written grid_x/y/z
            short = re.sub(r'_[xyz]$', '', col)
            if not re.search(r'(?<![\w])' + re.escape(col) + r'(?![\w])', text) and \
                    not (short != col and short + '_x/y/z' in text):
                bad.append('docs/schema.md: the section of %s does not name its column %s'
                           % (name, col))
    counts['columns'] = ncols
    print('\n'.join(bad))
    print(', '.join('%d %s' % (v, k) for k, v in counts.items()), file=sys.stderr)


if __name__ == '__main__':
    main()
