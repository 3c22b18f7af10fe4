#!/usr/bin/env python3
"""check_prometheus.py - check a Prometheus text exposition (format 0.0.4).

Usage: check_prometheus.py [FILE | http://HOST:PORT/metrics]   (default: stdin)

Checks what tests/unit/test_status.c checks, for a live daemon: every sample
belongs to the family declared by the # TYPE line before it (families are
contiguous, declared once, each with # HELP), names are omld_-prefixed
(or process_-, the standard process metrics),
counters end in _total and are >= 0, label values are correctly escaped,
histogram buckets are cumulative with increasing le ending at le="+Inf",
which equals _count. Exit status 0 when the text passes, 1 with one line
per problem on stderr otherwise. Standard library only.
"""
import math
import re
import sys
import urllib.request

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
SAMPLE = re.compile(r"^(" + NAME + r")(\{(?:" + LABEL + r"(?:,(?!\}))?)*\})? (\S+)( -?\d+)?$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def unescape(v):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], v)


def check(text):
    errs = []
    if not text.endswith("\n"):
        errs.append("text does not end in a newline")
    fams = {}        # name -> {"type", "help", "samples"}
    cur = None
    hist = {}        # (family, labels without le) -> [last_le, last_value, inf_value]
    for no, line in enumerate(text.splitlines(), 1):
        where = "line %d" % no
        if not line:
            errs.append(where + ": empty line")
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                f = fams.setdefault(name, {"type": None, "help": False, "samples": 0})
                if f["samples"]:
                    errs.append("%s: %s for %s after its samples" % (where, parts[1], name))
                if parts[1] == "HELP":
                    if f["help"]:
                        errs.append("%s: second HELP for %s" % (where, name))
                    f["help"] = True
                else:
                    t = parts[3] if len(parts) > 3 else ""
                    if f["type"]:
                        errs.append("%s: second TYPE for %s" % (where, name))
                    if t not in TYPES:
                        errs.append("%s: bad type %r" % (where, t))
                    f["type"] = t
                    cur = name
            continue
        m = SAMPLE.match(line)
        if not m:
            errs.append("%s: not a sample line: %r" % (where, line))
            continue
        name, labeltext, value = m.group(1), m.group(2) or "", m.group(5)
        labels = [(k, unescape(v)) for k, v in re.findall(LABEL, labeltext)]
        try:
            v = float(value)
        except ValueError:
            errs.append("%s: bad value %r" % (where, value))
            continue
        if cur is None:
            errs.append("%s: sample before any TYPE" % where)
            continue
        f = fams[cur]
        f["samples"] += 1
        if f["type"] == "histogram":
            suffix = next((s for s in ("_bucket", "_sum", "_count") if name == cur + s), None)
            if suffix is None:
                errs.append("%s: %s is not a sample of histogram %s" % (where, name, cur))
                continue
            key = (cur, tuple(l for l in labels if l[0] != "le"))
            le = [l[1] for l in labels if l[0] == "le"]
            if suffix == "_bucket":
                if not le:
                    errs.append("%s: bucket without le" % where)
                    continue
                lev = math.inf if le[0] == "+Inf" else float(le[0])
                st = hist.setdefault(key, [-math.inf, 0.0, None])
                if st[2] is not None:
                    errs.append("%s: bucket after +Inf" % where)
                if not lev > st[0]:
                    errs.append("%s: le not increasing" % where)
                if v < st[1]:
                    errs.append("%s: buckets not cumulative" % where)
                st[0], st[1] = lev, v
                if lev == math.inf:
                    st[2] = v
            else:
                st = hist.get(key)
                if not st or st[2] is None:
                    errs.append("%s: %s before its +Inf bucket" % (where, name))
                elif suffix == "_count" and v != st[2]:
                    errs.append("%s: _count %g != +Inf bucket %g" % (where, v, st[2]))
            continue
        if name != cur:
            errs.append("%s: sample %s outside its family %s" % (where, name, cur))
        if f["type"] == "counter":
            if not name.endswith("_total"):
                errs.append("%s: counter %s does not end in _total" % (where, name))
            if not v >= 0:
                errs.append("%s: negative counter" % where)
    for key, st in hist.items():
        if st[2] is None:
            errs.append("histogram %s %s has no +Inf bucket" % key)
    for name, f in fams.items():
        if not f["type"]:
            errs.append("family %s has no TYPE" % name)
        if not f["help"]:
            errs.append("family %s has no HELP" % name)
        if not name.startswith("omld_") and not name.startswith("process_"):
            errs.append("family %s is not omld_- (or process_-) prefixed" % name)
    return errs


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "-"
    if src == "-":
        text = sys.stdin.read()
    elif src.startswith("http://"):
        with urllib.request.urlopen(src, timeout=10) as r:
            ctype = r.headers.get("Content-Type", "")
            if "version=0.0.4" not in ctype:
                print("content type %r is not text/plain; version=0.0.4" % ctype, file=sys.stderr)
                return 1
            text = r.read().decode("utf-8")
    else:
        with open(src, encoding="utf-8") as f:
            text = f.read()
    errs = check(text)
    for e in errs:
        print(e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
