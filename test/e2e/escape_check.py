#!/usr/bin/env python3
"""escape_check.py KIND FILE [NAME...]: what t_escape.sh asks of one output of
a reader given wl_hostile's names, one line per violation on stdout (nothing
when it holds).

KIND is how the output is read:
  text    for people (tables, notes, stderr): UTF-8, no byte below 0x20 but
          LF, no DEL, no C1 control, line or paragraph separator or
          bidirectional formatting character (docs/usage.md, "Names with
          control characters")
  html    the report: as text, TAB allowed (the page's script), and its
          embedded data (<script id="shimmer-data">) is JSON
  csv     RFC 4180 as Python's csv module reads it: UTF-8, and every row has
          its table's header's column count (a blank line starts a table)
  json    one JSON document, UTF-8, no raw C1 control, separator or
          bidirectional character in it
  folded  flame-graph lines: each "pid P;MEMORY;frame;...;frame COUNT",
          matching ^[^\\n]* [0-9]+$, a frame never empty nor ending in what
          flamegraph.pl reads as a second count, no control character; and
          the hostile host block's line is the device block's line plus the
          frame of hostile_sym (same outer frames: the frame count is right)

Each NAME (exe, arg, sym, range, kern, thread) must appear in the output as
the format shows it: in text escaped by the documented rules (computed here
from the raw bytes, independently of shimmer), in CSV and JSON as the
string itself (U+FFFD for the byte that is not UTF-8).
"""
import csv
import io
import json
import re
import sys

# wl_hostile.c's HOSTILE and THREAD_NAME, and what the test adds
H = b"\x1b]0;x\x07|\r|\n|\t|\xc2\x9b|\xff|;|\x7f| 42"
NAMES = {
    "exe": b"wl" + H,
    # the collector keeps argv as JSON: the byte that is not UTF-8 is U+FFFD
    "arg": b"a" + H.replace(b"\xff", "\ufffd".encode()),
    "sym": b"sym" + H,
    "range": b"range" + H,
    "kern": b"kern" + H,
    "thread": b"t\x1b]0;\x07\r\n\t\xc2\x9b\xff;",
}
FILE_NAME = b"file\x1b]0;x\x07|\r|\n|\t|\xc2\x9b|\xff|;| 42.c"

LAYOUT = set(range(0x80, 0xA0)) | {0x061C, 0x200E, 0x200F} | set(range(0x2028, 0x202F)) | set(
    range(0x2066, 0x206A)
)


def utf8_len(b, i):
    """Length of the valid UTF-8 sequence at b[i], 0 if none (as common/utf8.h)."""
    c = b[i]
    if c < 0x80:
        return 1
    if 0xC2 <= c <= 0xDF:
        n = 2
    elif 0xE0 <= c <= 0xEF:
        n = 3
    elif 0xF0 <= c <= 0xF4:
        n = 4
    else:
        return 0
    try:
        b[i : i + n].decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return n if i + n <= len(b) else 0


def escaped(raw):
    """raw as docs/usage.md says text for people shows it."""
    out, i = [], 0
    while i < len(raw):
        n = utf8_len(raw, i)
        c = raw[i]
        if n == 0:
            out.append("\\x%02x" % c)
            i += 1
            continue
        ch = raw[i : i + n].decode("utf-8")
        i += n
        if ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\x%02x" % ord(ch))
        elif ord(ch) in LAYOUT:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def folded_frame(raw):
    """A frame as the folded format writes it (docs/usage.md)."""
    s = escaped(raw).replace(";", ":")
    return re.sub(r" (\d+(\.\d*)?)$", r"_\1", s)


def as_data(raw):
    return raw.decode("utf-8", errors="replace")


def decode(data, probs):
    """data as text; a byte that is not UTF-8 is a problem, then read on."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        probs.append("not UTF-8: %s" % e)
        return data.decode("utf-8", errors="replace")


def text_problems(data, allow_tab=False):
    probs = []
    text = decode(data, probs)
    for n, line in enumerate(text.split("\n"), 1):
        for ch in line:
            o = ord(ch)
            if (o < 0x20 and not (allow_tab and ch == "\t")) or o == 0x7F or o in LAYOUT:
                probs.append("line %d: U+%04X in %r" % (n, o, line[:160]))
                break
    return probs


def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            yield k
            yield from walk(x)
    elif isinstance(v, list):
        for x in v:
            yield from walk(x)
    elif isinstance(v, str):
        yield v


def check_json(data, names):
    probs = []
    text = decode(data, probs)
    try:
        doc = json.loads(text)
    except ValueError as e:
        return probs + ["not JSON: %s" % e]
    probs += ["raw U+%04X in the JSON text" % ord(ch) for ch in set(text) if ord(ch) in LAYOUT]
    strings = list(walk(doc))
    for name in names:
        want = as_data(NAMES[name])
        if not any(want in s for s in strings):
            probs.append("no string holds %s %r" % (name, want))
    return probs


def check_csv(data, names):
    probs, head, fields = [], None, []
    text = decode(data, probs)
    for n, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
        if not row:
            head = None
            continue
        if head is None:
            head = row
            continue
        fields += row
        if len(row) != len(head):
            probs.append("row %d: %d fields, its header %d: %r" % (n, len(row), len(head), row[:8]))
    for name in names:
        want = as_data(NAMES[name])
        if not any(want in f for f in fields):
            probs.append("no field holds %s %r" % (name, want))
    return probs


def check_folded(data):
    probs = text_problems(data)
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    stacks = []
    for n, line in enumerate(lines, 1):
        m = re.fullmatch(r"([^\n]*) ([0-9]+)", line)
        if not m:
            probs.append("line %d: not 'STACK COUNT': %r" % (n, line[:160]))
            continue
        stack = m.group(1)
        # flamegraph.pl reads a differential line as STACK COUNT1 COUNT2
        if re.search(r"\s+?(\d+(?:\.\d*)?)$", stack):
            probs.append("line %d: the stack ends in a count: %r" % (n, line[-80:]))
        f = stack.split(";")
        if len(f) < 3 or not re.fullmatch(r"pid [0-9]+", f[0]) or not re.fullmatch(
            r"host|pinned|(cuda|managed):[0-9]+", f[1]
        ):
            probs.append("line %d: not 'pid P;MEMORY;...': %r" % (n, line[:160]))
        elif "" in f:
            probs.append("line %d: an empty frame: %r" % (n, line[:160]))
        else:
            stacks.append(f)
    # The hostile blocks: hostile_site's cudaMalloc (device) and its call of
    # hostile_sym's malloc (host), one frame deeper on the same path.
    site = "hostile_site (" + folded_frame(FILE_NAME) + ":"
    sym = folded_frame(NAMES["sym"] + b" (" + NAMES["exe"] + b")")
    host = [f for f in stacks if f[1] == "host" and f[-1] == sym]
    dev = [f for f in stacks if f[1].startswith("cuda:") and f[-1].startswith(site)]
    if len(host) != 1 or len(dev) != 1:
        probs.append(
            "%d host lines end in %r, %d device lines in %r (1 and 1 expected)"
            % (len(host), sym, len(dev), site)
        )
    elif not (
        len(host[0]) == len(dev[0]) + 1
        and host[0][2:-2] == dev[0][2:-1]
        and host[0][-2].startswith(site)
        and host[0][-3].startswith("worker (")
    ):
        probs.append("the host line %r is not the device line %r and one frame" % (host[0], dev[0]))
    return probs


def main():
    kind, path, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    data = open(path, "rb").read()
    if kind in ("text", "html"):
        probs = text_problems(data, allow_tab=kind == "html")
        if kind == "html":
            m = re.search(rb'<script type="application/json" id="shimmer-data">(.*?)</script>', data, re.S)
            probs += ["no embedded data"] if not m else check_json(m.group(1), [])
        text = data.decode("utf-8", errors="replace")
        for name in names:
            if escaped(NAMES[name]) not in text:
                probs.append("%s not shown as %s" % (name, escaped(NAMES[name])))
    elif kind == "json":
        probs = check_json(data, names)
    elif kind == "csv":
        probs = check_csv(data, names)
    elif kind == "folded":
        probs = check_folded(data)
    else:
        sys.exit("unknown kind " + kind)
    for p in probs[:10]:
        print(p)


main()
