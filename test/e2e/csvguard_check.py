#!/usr/bin/env python3
"""csvguard_check.py FILE [NAME...]: what t_csvguard.sh asks of one CSV output
whose store holds names that start with what a spreadsheet runs as a formula
(=, +, -, @, TAB, CR: OWASP's CSV injection).  One line per violation on
stdout, nothing when it holds.

The file is read field by field as RFC 4180 writes it (this reader knows
which fields were quoted), and by Python's csv module (each row has its
table's header's column count; a blank line starts a table):

  - no field starts with one of those characters (after any 's) unless it
    is a number written bare (-1500, -2.5: numbers stay numbers);
  - a quoted field that does has a ' in front (the guard);
  - no number is quoted;
  - each NAME is read back, guard dropped (docs/usage.md: the first ' of a
    quoted field whose first character other than ' is a formula's), as
    the start of some field: the guard fired on it and lost nothing.
"""
import csv
import io
import re
import sys

FORMULA = "=+-@\t\r"
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def records(text):
    """The rows of text as lists of (value, quoted), RFC 4180."""
    rows, row, i, n = [], [], 0, len(text)
    while i < n:
        if text[i] == '"':
            i += 1
            v = []
            while i < n:
                if text[i] == '"':
                    if i + 1 < n and text[i + 1] == '"':
                        v.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                v.append(text[i])
                i += 1
            row.append(("".join(v), True))
        else:
            j = i
            while j < n and text[j] not in ",\n":
                j += 1
            row.append((text[i:j], False))
            i = j
        if i < n and text[i] == ",":
            i += 1
            continue
        # end of the line (or of the file)
        if row != [("", False)]:
            rows.append(row)
        else:
            rows.append([])
        row = []
        i += 1
    return rows


def guarded(v):
    body = v.lstrip("'")
    return body != "" and body[0] in FORMULA


def unguard(v, quoted):
    return v[1:] if quoted and v.startswith("'") and guarded(v) else v


def main():
    path, names = sys.argv[1], sys.argv[2:]
    probs = []
    text = open(path, "rb").read().decode("utf-8", errors="replace")
    head = None
    for n, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
        if not row:
            head = None
        elif head is None:
            head = row
        elif len(row) != len(head):
            probs.append("row %d: %d fields, its header %d: %r" % (n, len(row), len(head), row[:8]))
    values = []
    for n, row in enumerate(records(text), 1):
        for v, quoted in row:
            values.append(unguard(v, quoted))
            if NUMBER.fullmatch(v):
                if quoted:
                    probs.append("row %d: a number quoted: %r" % (n, v))
                continue
            if not guarded(v):
                continue
            if not quoted:
                probs.append("row %d: a bare field a spreadsheet runs: %r" % (n, v[:80]))
            elif not v.startswith("'"):
                probs.append("row %d: a quoted field a spreadsheet runs: %r" % (n, v[:80]))
    for name in names:
        if not any(v.startswith(name) for v in values):
            probs.append("no field starts with %r" % name)
    if not values:
        probs.append("no field at all")
    for p in probs[:10]:
        print(p)


main()
