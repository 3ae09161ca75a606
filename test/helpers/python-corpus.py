"""The query gate's corpus with the official Python driver (rethinkdb on PyPI): each query's answer, or its error's
class and message, as one JSON object on stdout, so that a test compares the answers through the gate with those
straight from the proxy. Usage: python test/helpers/python-corpus.py PORT (the tables of test/real/gate.test.js)."""
import json
import sys
import time

from rethinkdb import RethinkDB

r = RethinkDB()
port = int(sys.argv[1])


def connect(**kwargs):
    return r.connect(host="127.0.0.1", port=port, **kwargs)


def outcome(run):
    try:
        return {"value": run()}
    except Exception as err:  # the driver's own error classes, compared by name and message
        # The port a message names is the one this run connected to (the gate's or the proxy's): said as PORT.
        return {"error": type(err).__name__, "message": str(err).replace(":%d" % port, ":PORT")}


conn = connect()
usertable = r.db("ycsb").table("usertable")
gate_table = r.db("ycsb").table("gate")


def closed_early():
    cursor = usertable.order_by(index="id").run(conn, max_batch_rows=10)
    first = [next(cursor)["id"] for _ in range(15)]
    cursor.close()
    return first


def big_document():
    doc = {"id": "py-big", "blob": "y" * (3 * 1024 * 1024), "list": list(range(20000))}
    gate_table.insert(doc, conflict="replace").run(conn)
    back = gate_table.get("py-big").run(conn)
    return back == doc


def noreply():
    for i in range(50):
        gate_table.insert({"id": "py-nr-%d" % i}, conflict="replace").run(conn, noreply=True)
    conn.noreply_wait()
    return gate_table.get_all(*["py-nr-%d" % i for i in range(50)]).count().run(conn)


def changefeed():
    feed = gate_table.get("py-feed").changes().run(conn)
    writer = connect()
    # A value of its own each run: writing the same document again is no change, and the feed would wait.
    n = time.time()
    gate_table.insert({"id": "py-feed", "n": n}, conflict="replace").run(writer)
    change = next(feed)
    feed.close()
    writer.close()
    return change["new_val"] == {"id": "py-feed", "n": n}


def login(password):
    c = connect(user="gateuser", password=password)
    count = gate_table.count().run(c) > 0
    c.close()
    return count


CORPUS = [
    ("an atom", lambda: r.expr({"a": 1, "b": [1, 2, 3], "s": "text"}).run(conn)),
    ("a count", lambda: usertable.count().run(conn)),
    ("a sequence over many batches", lambda: [d["id"] for d in usertable.order_by(index="id").limit(2000).run(conn, max_batch_rows=37)]),
    ("a cursor closed after two batches", closed_early),
    ("server()", lambda: conn.server()),
    ("a user error", lambda: r.error("boom").run(conn)),
    ("a logic error", lambda: r.expr(1).add("a").run(conn)),
    ("an op error", lambda: r.db("nonexistent").table("x").run(conn)),
    ("a document of several MB", big_document),
    ("noreply and noreply_wait", noreply),
    ("a changefeed", changefeed),
    ("the right password", lambda: login("right-password")),
    ("a wrong password", lambda: login("wrong")),
]

print(json.dumps({name: outcome(run) for name, run in CORPUS}, sort_keys=True))
