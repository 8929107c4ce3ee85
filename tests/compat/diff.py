#!/usr/bin/python3
"""Compare two results files written by run.py, e.g. RabbitMQ's recording and a Wharf run.

    diff.py REFERENCE.json CANDIDATE.json [--known FILE | --no-known] [-v] [--common]

Every difference in "scenarios" is printed with its scenario, its path (step labels and keys
joined by '/', list positions as numbers) and both values, unless an entry of the
known-differences file explains it. Exit status 1 when any difference is unexplained.

known_differences.json is a list of {"scenario", "path", "reason"} objects: accepted,
documented differences (the reason cites docs/amqp.md). "scenario" and "path" are
shell-style patterns (fnmatch, case-sensitive); a path also covers everything below it.
An entry that explains nothing is reported as stale (not an error).

Comparison rules: dicts key by key; lists of equal length element by element, lists of
different lengths as a whole; a dict whose kind differs ("m" method name vs "error") as a
whole; anything else by equality.
"""
import argparse
import fnmatch
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def kind(v):
    if isinstance(v, dict):
        if "error" in v:
            return ("error", v.get("error"))
        if "m" in v:
            return ("m", v.get("m"))
    return None


def walk(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        if kind(a) != kind(b):
            out.append((path, a, b))
            return
        for k in list(a) + [k for k in b if k not in a]:
            p = path + [str(k)]
            if k not in a:
                out.append((p, "<absent>", b[k]))
            elif k not in b:
                out.append((p, a[k], "<absent>"))
            else:
                walk(a[k], b[k], p, out)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, path + [str(i)], out)
        return
    if a != b or type(a) is not type(b):
        out.append((path, a, b))


def matches(entry, scenario, path):
    if not fnmatch.fnmatchcase(scenario, entry["scenario"]):
        return False
    pat = entry["path"]
    return (path == pat or path.startswith(pat + "/") or fnmatch.fnmatchcase(path, pat)
            or fnmatch.fnmatchcase(path, pat + "/*"))


def short(v, limit=400):
    s = json.dumps(v, ensure_ascii=False, sort_keys=False)
    return s if len(s) <= limit else s[:limit] + "...(%d chars)" % len(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference")
    ap.add_argument("candidate")
    ap.add_argument("--known", default=os.path.join(HERE, "known_differences.json"))
    ap.add_argument("--no-known", action="store_true",
                    help="explain nothing (e.g. to compare two runs of the same broker)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="also print the explained differences with their reasons")
    ap.add_argument("--common", action="store_true",
                    help="compare only the scenarios present in both files")
    args = ap.parse_args()

    ref = json.load(open(args.reference))["scenarios"]
    cand = json.load(open(args.candidate))["scenarios"]
    known = [] if args.no_known or not os.path.exists(args.known) else \
        json.load(open(args.known))
    used = [0] * len(known)

    names = [n for n in ref if n in cand] if args.common else \
        list(ref) + [n for n in cand if n not in ref]
    unexplained, explained = [], []
    for name in names:
        diffs = []
        if name not in cand:
            diffs.append(([], "<ran>", "<not run>"))
        elif name not in ref:
            diffs.append(([], "<not recorded>", "<ran>"))
        else:
            walk(ref[name], cand[name], [], diffs)
        for path, a, b in diffs:
            p = "/".join(path)
            reason = None
            for i, e in enumerate(known):
                if matches(e, name, p):
                    used[i] += 1
                    reason = e["reason"]
                    break
            (explained if reason else unexplained).append((name, p, a, b, reason))

    for name, p, a, b, _ in unexplained:
        print("DIFF %s: %s" % (name, p or "<whole scenario>"))
        print("    reference: %s" % short(a))
        print("    candidate: %s" % short(b))
    if args.verbose:
        for name, p, a, b, reason in explained:
            print("KNOWN %s: %s  (%s)" % (name, p or "<whole scenario>", reason))
            print("    reference: %s" % short(a))
            print("    candidate: %s" % short(b))
    for i, e in enumerate(known):
        if not used[i]:
            print("STALE known difference (explains nothing): %s %s" % (e["scenario"],
                                                                      e["path"]))
    print("%d scenarios compared: %d unexplained difference(s), %d known" %
          (len(names), len(unexplained), len(explained)))
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
