"""The table rows the GPU checks print (check.py, graphs.sh) and what they read."""
import json

failed = []  # the checks that failed, in order


def row(check, ours, oracle, good, width=44):
    """One check: its name, shimmer's figure, the oracle's, PASS or FAIL."""
    if not good:
        failed.append(check)
    print(f"{check:<{width}} {str(ours):>14} {str(oracle):>14}  {'PASS' if good else 'FAIL'}")


def last_json(path):
    """The last line of path that is a JSON object ({} when none)."""
    try:
        lines = [l for l in open(path) if l.startswith("{")]
    except OSError:
        return {}
    return json.loads(lines[-1]) if lines else {}


def load(path):
    """path's JSON, {} when it is missing or not JSON."""
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return {}
