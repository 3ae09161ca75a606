"""What an application needs around the official Python driver (`rethinkdb` on PyPI) to go through a gate's stop (a
rollout of the proxy Deployment, a drained node, a deleted pod) and a gate's crash without errors it cannot handle.
RethinkDB's drivers never reconnect by themselves: a connection the gate closed stays closed, and every query run on
it fails with "Connection is closed."

ResilientConnection(connect) keeps one connection to the client Service (connect() opens a new one) and runs queries
on it:
  - a connection found closed before a query is sent is replaced first (right away, then with backoff, within
    max_wait_s): a stopping gate closes each connection only once nothing of it is in flight, so this is the common
    case, and nothing is lost;
  - a query whose connection broke after it was sent is sent again on a new connection when the caller says it is
    safe to (resend=True: a read, or a write that has the same effect twice, such as a replace by primary key); else
    it raises OutcomeUnknown, because the write may have been applied: the caller decides.
  - a query a stopping gate answered instead of running it (ReqlOpFailedError saying "the query gate is stopping")
    is sent again on a new connection, whatever it is: it was not run.
Any other error (ReqlOpFailedError, ReqlQueryLogicError, ...) is the query's answer and passes through.

Usage:
    from rethinkdb import RethinkDB
    r = RethinkDB()
    db = ResilientConnection(lambda: r.connect(host="rethinkdb-client", port=28015))
    doc = db.run(r.table("users").get(user_id), resend=True)
    db.run(r.table("users").get(user_id).update({"visits": r.row["visits"] + 1}))   # not resent
    db.close()

Tested with a gate stopping and a gate crashing under load: test/real/client-reconnect.test.js.
"""

import json
import socket
import sys
import time

from rethinkdb import errors


class OutcomeUnknown(Exception):
    """The connection broke after the query was sent: it may or may not have been applied."""


def is_gate_stopping(err):
    """The gate's answer to a query it did not run because it is stopping (gate/src/protocol.js GATE_STOPPING)."""
    return isinstance(err, errors.ReqlOpFailedError) and "query gate is stopping" in str(err)


def is_connection_error(err):
    return isinstance(err, (errors.ReqlDriverError, socket.error, ConnectionError))


class ResilientConnection:
    def __init__(self, connect, max_wait_s=10.0, min_backoff_s=0.05, max_backoff_s=1.0):
        self._connect = connect
        self._max_wait_s = max_wait_s
        self._min_backoff_s = min_backoff_s
        self._max_backoff_s = max_backoff_s
        self._conn = None
        self.reconnects = 0

    def _current(self):
        if self._conn is not None and self._conn.is_open():
            return self._conn
        until = time.monotonic() + self._max_wait_s
        backoff = self._min_backoff_s
        first = True
        while True:
            try:
                fresh = self._connect()
            except Exception as err:  # the driver raises ReqlDriverError; a refused socket may surface as OSError
                if not is_connection_error(err) or time.monotonic() + backoff > until:
                    raise
                if not first:
                    backoff = min(self._max_backoff_s, backoff * 2)
                first = False
                time.sleep(backoff)
                continue
            if self._conn is not None:
                self.reconnects += 1
            self._conn = fresh
            return fresh

    def run(self, query, resend=False, **run_options):
        until = time.monotonic() + self._max_wait_s
        while True:
            conn = self._current()
            try:
                return query.run(conn, **run_options)
            except Exception as err:
                if is_gate_stopping(err):
                    try:
                        conn.close(noreply_wait=False)
                    except Exception:
                        pass
                    continue
                if not is_connection_error(err):
                    raise
                try:
                    conn.close(noreply_wait=False)
                except Exception:
                    pass
                if not resend:
                    raise OutcomeUnknown(str(err)) from err
                if time.monotonic() > until:
                    raise

    def close(self):
        if self._conn is not None and self._conn.is_open():
            self._conn.close(noreply_wait=False)


def main(host="127.0.0.1", port="28015", seconds="10"):
    """python resilient_connection.py HOST PORT SECONDS: reads and writes test.resilient, prints counts as JSON."""
    from rethinkdb import RethinkDB

    r = RethinkDB()
    db = ResilientConnection(lambda: r.connect(host=host, port=int(port)))
    db.run(r.branch(r.db_list().contains("test"), None, r.db_create("test")), resend=True)
    db.run(r.branch(r.db("test").table_list().contains("resilient"), None, r.db("test").table_create("resilient")), resend=True)
    table = r.db("test").table("resilient")
    counts = {"reads": 0, "writes": 0, "failed": 0, "unknown": 0}
    until = time.monotonic() + float(seconds)
    i = 0
    while time.monotonic() < until:
        try:
            if i % 2 == 0:
                db.run(table.get("k%d" % (i % 100)), resend=True)
                counts["reads"] += 1
            else:
                db.run(table.insert({"id": "k%d" % (i % 100), "i": i}, conflict="replace"), resend=True)
                counts["writes"] += 1
        except OutcomeUnknown:
            counts["unknown"] += 1
        except Exception:
            counts["failed"] += 1
        i += 1
    db.close()
    counts["reconnects"] = db.reconnects
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
