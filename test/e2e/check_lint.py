#!/usr/bin/env python3
"""Finds check calls in the e2e scripts whose command goes on past an
unquoted '&&' or '||': the shell ends check's arguments there, so what
follows runs outside check and its failure is never seen (lib.sh's holds
'...' keeps a chain inside).  Usage: check_lint.py SCRIPT...; prints
FILE:LINE: TEXT for each and exits 1 if any."""
import shlex
import sys

bad = 0
for path in sys.argv[1:]:
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        first = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i]
        i += 1
        if not text.lstrip().startswith("check "):
            continue
        try:
            lex = shlex.shlex(text, posix=True, punctuation_chars="&|;")
            lex.whitespace_split = True
            tokens = list(lex)
        except ValueError:
            continue  # a quote that spans lines: not a one-line call
        if any(t in ("&&", "||") for t in tokens):
            print(f"{path}:{first + 1}: {text.strip()[:120]}")
            bad += 1
sys.exit(1 if bad else 0)
