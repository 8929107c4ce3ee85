#!/usr/bin/python3
"""Run the differential AMQP scenarios against one broker and write what it answered.

    run.py --host 127.0.0.1 --port 5672 --out results.json [--only NAME ...] [--list]

Each scenario runs in its own try/except: a scenario that fails in the harness, or whose step
times out (a broker that never answers), is recorded with "_error" (and its steps so far), and
the run goes on. The output is {"meta": {...}, "scenarios": {name: record}}; diff.py compares
only "scenarios". Use Debian's interpreter (/usr/bin/python3), where python3-pika lives.
"""
import argparse
import json
import os
import signal
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pika  # noqa: E402

import scenarios  # noqa: E402
from harness import ScenarioAborted, normalise  # noqa: E402


SCENARIO_TIMEOUT_S = 60


def _on_watchdog(signum, frame):
    raise ScenarioAborted("scenario did not finish within %d s" % SCENARIO_TIMEOUT_S)


def run_one(name, fn, host, port):
    """Steps have their own 5 s limit (SIGALRM); anything outside a step that blocks (a
    barrier, a channel open in a helper) is cut by this watchdog (SIGUSR1)."""
    scenarios.CURRENT[0] = None
    started = time.monotonic()
    signal.signal(signal.SIGUSR1, _on_watchdog)
    timer = threading.Timer(SCENARIO_TIMEOUT_S, os.kill, (os.getpid(), signal.SIGUSR1))
    timer.daemon = True
    timer.start()
    try:
        try:
            record = fn(host, port)
        finally:
            timer.cancel()
    except ScenarioAborted as exc:
        x = scenarios.CURRENT[0]
        record = dict(x.record) if x else {}
        record["_error"] = "aborted: %s" % exc
    except Exception as exc:  # the harness itself failed: recorded, the run goes on
        x = scenarios.CURRENT[0]
        record = dict(x.record) if x else {}
        record["_error"] = "%s: %s" % (type(exc).__name__, exc)
        record["_traceback"] = traceback.format_exc().splitlines()[-6:]
    return normalise(record), time.monotonic() - started


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5672)
    ap.add_argument("--out", help="results file (JSON)")
    ap.add_argument("--only", action="append", default=[],
                    help="run only this scenario (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    ap.add_argument("--broker", default="", help="free text stored in meta (e.g. 'wharf')")
    args = ap.parse_args()

    if args.list:
        for name, fn in scenarios.SCENARIOS.items():
            doc = (fn.__doc__ or "").strip().splitlines()
            print("%-45s %s" % (name, doc[0] if doc else ""))
        return 0
    if not args.out:
        ap.error("--out is required")
    unknown = [n for n in args.only if n not in scenarios.SCENARIOS]
    if unknown:
        ap.error("unknown scenario(s): %s" % ", ".join(unknown))

    names = args.only or list(scenarios.SCENARIOS)
    results = {}
    timings = {}
    failed = []
    for name in names:
        record, secs = run_one(name, scenarios.SCENARIOS[name], args.host, args.port)
        results[name] = record
        timings[name] = round(secs, 2)
        status = "ERROR " + record["_error"] if "_error" in record else "ok"
        if "_error" in record:
            failed.append(name)
        print("%-45s %5.2fs %s" % (name, secs, status), flush=True)

    out = {
        "meta": {"host": args.host, "port": args.port, "broker": args.broker,
                 "pika": pika.__version__, "scenarios": len(names),
                 "harness_errors": failed, "seconds": timings},
        "scenarios": results,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False, sort_keys=False)
        f.write("\n")
    print("%d scenarios, %d with harness errors -> %s" % (len(names), len(failed), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
