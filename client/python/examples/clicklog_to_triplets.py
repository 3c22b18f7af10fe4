#!/usr/bin/python3
"""clicklog_to_triplets.py - feed a click log to omld as triplets.

The log is JSON lines, one search / recommendation impression each:

    {"query": "item-17", "clicked": ["item-3"], "skipped": ["item-8", "item-9"]}

Each line becomes one triplet (anchor=query, positive=c, negative=s) for
every clicked c and skipped s: "the query is more like what the user
clicked than like what they skipped". All ids must name items already
stored in omld (put_items). Triplets are sent with add_triplets in batches.

    clicklog_to_triplets.py clicks.jsonl               # whole file, then exit
    clicklog_to_triplets.py --follow clicks.jsonl      # like tail -f: new lines only
    clicklog_to_triplets.py --follow --from-start clicks.jsonl
    producer | clicklog_to_triplets.py -               # stdin until EOF

Malformed lines (bad JSON, missing or mistyped fields) are skipped with a
warning on stderr, and so are triplets naming an id the daemon does not
know (the daemon's NOT_FOUND names the triplet; it is dropped and the rest
of the batch resent). In --follow mode a partial batch is sent once the log
has been idle for --flush-ms, the follower survives log rotation and
truncation, and reconnects when the daemon goes away. SIGINT / SIGTERM send
what is pending and exit 0. A summary goes to stderr at the end.

Exit status: 0 done, 1 the daemon refused a batch for another reason, or
could not be reached (without --follow), 2 bad usage.
"""
import argparse
import json
import os
import re
import signal
import sys
import time

try:
    import omld
except ImportError:  # run from the source tree: client/python/examples/..
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import omld

_TRIPLET_INDEX = re.compile(r"^add_triplets\.triplets\[(\d+)\]")


def warn(msg):
    print("clicklog_to_triplets: " + msg, file=sys.stderr, flush=True)


def _ids(value):
    return isinstance(value, list) and all(isinstance(x, str) and x for x in value)


def line_to_triplets(line):
    """The triplets of one log line; raises ValueError saying what is wrong."""
    try:
        rec = json.loads(line)
    except ValueError as e:
        raise ValueError("not JSON (%s)" % e)
    if not isinstance(rec, dict):
        raise ValueError("not a JSON object")
    q = rec.get("query")
    if not isinstance(q, str) or not q:
        raise ValueError('"query" must be a non-empty string')
    clicked, skipped = rec.get("clicked", []), rec.get("skipped", [])
    if not _ids(clicked) or not _ids(skipped):
        raise ValueError('"clicked" and "skipped" must be lists of non-empty strings')
    return [(q, c, s) for c in clicked for s in skipped if c != s and s != q]


class Sender:
    """Batches triplets and sends them, dropping those the daemon does not
    know and retrying (in follow mode) when it is away or busy."""

    def __init__(self, args):
        self.args = args
        self.client = None
        self.pending = []
        self.sent = 0
        self.batches = 0
        self.dropped = 0

    def _connect(self):
        if self.client is None or self.client.closed:
            self.client = omld.Client(self.args.server, timeout=self.args.timeout)
        return self.client

    def add(self, triplets):
        self.pending.extend(triplets)
        while len(self.pending) >= self.args.batch:
            self._send(self.pending[:self.args.batch])
            del self.pending[:self.args.batch]

    def flush(self):
        while self.pending:
            n = min(len(self.pending), self.args.batch)
            self._send(self.pending[:n])
            del self.pending[:n]

    def _send(self, batch):
        delay = 0.2
        while batch:
            try:
                r = self._connect().add_triplets(batch)
                self.sent += r.accepted
                self.batches += 1
                return
            except omld.NotFound as e:
                m = _TRIPLET_INDEX.match(e.field)
                if m is None or int(m.group(1)) >= len(batch):
                    raise
                i = int(m.group(1))
                warn("dropping triplet %r: %s" % (batch[i], e.message))
                self.dropped += 1
                batch = batch[:i] + batch[i + 1:]
            except (omld.OmldConnectionError, omld.Unavailable, omld.ResourceExhausted) as e:
                if self.client is not None and isinstance(e, omld.OmldConnectionError):
                    self.client.close()
                # Only a follower waits for the daemon, and not forever once
                # asked to stop.
                if not self.args.follow or (STOP.requested and delay >= 1.6):
                    raise
                warn("%s; retrying in %.1fs" % (e, delay))
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def close(self):
        if self.client is not None:
            self.client.close()


class _Stop:
    requested = False
    interrupt = False  # raise at once (a blocking read of stdin)


STOP = _Stop()


def _on_signal(signum, frame):
    STOP.requested = True
    if STOP.interrupt:
        STOP.interrupt = False
        raise KeyboardInterrupt


def read_lines(args):
    """Yields complete lines, or None when following and nothing new came
    for a while (time to send a partial batch)."""
    if args.file == "-":
        while not STOP.requested:
            try:
                STOP.interrupt = True
                line = sys.stdin.readline()
            except KeyboardInterrupt:
                return
            finally:
                STOP.interrupt = False
            if not line:
                return
            yield line
        return
    f = open(args.file, "r", encoding="utf-8", errors="replace")
    try:
        if args.follow and not args.from_start:
            f.seek(0, os.SEEK_END)
        if args.follow and not args.quiet:
            warn("following %s from byte %d" % (args.file, f.tell()))
        partial = ""
        idle_since = None
        while not STOP.requested:
            chunk = f.readline()
            if chunk:
                partial += chunk
                if partial.endswith("\n"):
                    yield partial
                    partial = ""
                idle_since = None
                continue
            if not args.follow:
                if partial:
                    yield partial  # a last line without newline
                return
            # At the end: rotated or truncated? Else wait for more.
            try:
                st = os.stat(args.file)
                if st.st_ino != os.fstat(f.fileno()).st_ino or st.st_size < f.tell():
                    f.close()
                    f = open(args.file, "r", encoding="utf-8", errors="replace")
                    partial = ""
                    continue
            except FileNotFoundError:
                pass  # between rotation steps; try again
            now = time.monotonic()
            if idle_since is None:
                idle_since = now
            elif now - idle_since >= args.flush_ms / 1000.0:
                yield None
                idle_since = now + 3600.0  # once per idle stretch
            time.sleep(min(0.05, args.flush_ms / 1000.0))
    finally:
        f.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("file", nargs="?", default="-", help="the click log; - for stdin (default)")
    ap.add_argument("--server", default=os.environ.get("OMLD_SERVER", omld.DEFAULT_SERVER),
                    help="omld RPC address, HOST:PORT or unix:/path (default %(default)s)")
    ap.add_argument("--batch", type=int, default=500, help="triplets per request (default 500)")
    ap.add_argument("--follow", "-f", action="store_true",
                    help="keep reading new lines as they are appended, like tail -f")
    ap.add_argument("--from-start", action="store_true",
                    help="with --follow: read the existing lines first (default: only new ones)")
    ap.add_argument("--flush-ms", type=int, default=500,
                    help="with --follow: send a partial batch after this idle time (default 500)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    ap.add_argument("--quiet", "-q", action="store_true", help="no summary")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.flush_ms < 1:
        ap.error("--batch and --flush-ms must be >= 1")
    if args.file != "-" and not os.path.exists(args.file) and not args.follow:
        ap.error("%s: no such file" % args.file)

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    sender = Sender(args)
    lines = malformed = 0
    status = 0
    try:
        for line in read_lines(args):
            if line is None:
                sender.flush()
                continue
            lines += 1
            if not line.strip():
                continue
            try:
                sender.add(line_to_triplets(line))
            except ValueError as e:
                malformed += 1
                warn("line %d: skipped: %s" % (lines, e))
        sender.flush()
    except omld.OmldError as e:
        warn("the daemon refused a batch: %s" % e)
        status = 1
    except omld.OmldConnectionError as e:
        warn(str(e))
        status = 1
    finally:
        sender.close()
    if not args.quiet:
        warn("%d lines, %d malformed, %d triplets sent in %d requests, %d dropped (unknown ids)"
             % (lines, malformed, sender.sent, sender.batches, sender.dropped))
    return status


if __name__ == "__main__":
    sys.exit(main())
