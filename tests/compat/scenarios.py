"""Differential AMQP 0-9-1 scenarios: the same client steps against RabbitMQ and against Wharf.

Each entry of SCENARIOS is a function (host, port) -> record, a JSON-serialisable dict of
step label -> what the broker answered (method fields, messages with properties and typed
headers, error code, reply text and failing class/method ids, events in arrival order).
Scenarios use only names of the form cx.<scenario>.<suffix>, so they are independent, and
delete what they created. Written against Debian's python3-pika 1.2 (BlockingConnection);
where pika refuses to send something a broker must answer (a reused consumer tag,
immediate=true, ...), the method is sent raw on the channel (Ctx.raw).
"""
import datetime
import decimal
import struct

import pika
import pika.spec as spec

from harness import Ctx, Raw, raw_int, render_get

P = pika.BasicProperties
SCENARIOS = {}
CURRENT = [None]


def scenario(fn):
    name = fn.__name__

    def run(host, port):
        x = Ctx(name, host, port)
        CURRENT[0] = x
        try:
            fn(x)
        finally:
            x.cleanup()
        return x.record

    run.__name__ = name
    run.__doc__ = fn.__doc__
    SCENARIOS[name] = run
    return fn


def gets(x, label, ch, queue, n, auto_ack=True):
    """Up to n basic.gets, recorded together as a list."""
    def go():
        out = []
        for _ in range(n):
            out.append(render_get(ch.basic_get(queue, auto_ack=auto_ack)))
            if out[-1]["m"] == "Basic.GetEmpty":
                break
        return out
    return x.do(label, go, lambda v: v)


def by_consumer(events):
    """Deliveries as consumer tag -> bodies in delivery order: deliveries on different channels
    may arrive in any order relative to each other, those of one consumer may not."""
    out = {}
    for e in events:
        out.setdefault(e["consumer_tag"], []).append(e["body"])
    return out


def bodies(x, label, ch, queue, n=10):
    """Bodies left in a queue, drained with no-ack gets."""
    def go():
        out = []
        for _ in range(n):
            m, _p, b = ch.basic_get(queue, auto_ack=True)
            if m is None:
                break
            out.append(b.decode())
        return out
    return x.do(label, go, lambda v: v)


# ==============================================================================================
# connection

@scenario
def connection_start(x):
    """connection.start / tune as the client sees them."""
    c = x.connect()
    start = tune = None
    for e in x.entries(c):
        if e["method"].NAME == "Connection.Start" and start is None:
            start = e["method"]
        if e["method"].NAME == "Connection.Tune" and tune is None:
            tune = e["method"]
    sp = start.server_properties
    x.note("start", {
        "version": [start.version_major, start.version_minor],
        "mechanisms": sorted(start.mechanisms.decode().split()) if isinstance(
            start.mechanisms, bytes) else sorted(str(start.mechanisms).split()),
        "locales": start.locales.decode() if isinstance(start.locales, bytes)
        else start.locales,
        "server_property_keys": sorted(sp.keys()),
        "product": sp.get("product"),
        "version_string": sp.get("version"),
        "capabilities": {k: sp["capabilities"][k] for k in sorted(sp.get("capabilities", {}))},
    })
    x.note("tune", {"channel_max": tune.channel_max, "frame_max": tune.frame_max,
                    "heartbeat": tune.heartbeat})


@scenario
def channel_open_twice(x):
    """A second channel.open on an open channel is a hard 504."""
    c = x.connect()
    ch = c.channel()
    x.do("second_open", lambda: x.raw(c, ch, spec.Channel.Open(), replies=("Channel.OpenOk",)))


@scenario
def channel_flow(x):
    """channel.flow(true) is answered; channel.flow(false) is a hard 540."""
    c = x.connect()
    ch = c.channel()
    x.do("flow_true", lambda: x.raw(c, ch, spec.Channel.Flow(active=True),
                                    replies=("Channel.FlowOk",)))
    x.do("flow_false", lambda: x.raw(c, ch, spec.Channel.Flow(active=False),
                                     replies=("Channel.FlowOk",)))


# ==============================================================================================
# queue.declare

@scenario
def queue_declare_server_named(x):
    c = x.connect()
    ch = c.channel()
    x.do("exclusive_server_named", lambda: ch.queue_declare("", exclusive=True))
    x.do("plain_server_named", lambda: ch.queue_declare(""))
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    ch.basic_publish("", q, b"1")
    ch.basic_publish("", q, b"2")
    x.barrier(ch)
    x.do("redeclare_counts", lambda: ch.queue_declare(q))
    x.consume(c, ch, q, consumer_tag="c1")
    x.pump(c, 0.2)
    x.do("passive_with_consumer", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_declare_passive(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    ch.basic_publish("", q, b"m")
    x.barrier(ch)
    x.do("passive_existing", lambda: ch.queue_declare(q, passive=True))
    x.do("passive_other_flags_ignored",
         lambda: ch.queue_declare(q, passive=True, durable=True, auto_delete=True,
                                  arguments={"x-message-ttl": 5}))
    x.do("passive_missing", lambda: ch.queue_declare(x.name("missing"), passive=True))
    ch = c.channel()
    x.do("passive_reserved_missing", lambda: ch.queue_declare("amq.nope", passive=True))
    ch = c.channel()
    x.do("declare_reserved_name", lambda: ch.queue_declare("amq.cx-reserved"))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_exclusive_other_connection(x):
    """Another connection's exclusive queue: 405 for every operation on it."""
    a = x.connect()
    cha = a.channel()
    q = x.name("q")
    x.do("declare_exclusive", lambda: cha.queue_declare(q, exclusive=True))
    b = x.connect()
    ops = [
        ("declare", lambda ch: ch.queue_declare(q)),
        ("declare_exclusive", lambda ch: ch.queue_declare(q, exclusive=True)),
        ("declare_passive", lambda ch: ch.queue_declare(q, passive=True)),
        ("get", lambda ch: ch.basic_get(q)),
        ("consume", lambda ch: x.consume(b, ch, q, consumer_tag="t")),
        ("bind", lambda ch: ch.queue_bind(q, "amq.direct", "k")),
        ("purge", lambda ch: ch.queue_purge(q)),
        ("delete", lambda ch: ch.queue_delete(q)),
    ]
    for label, op in ops:
        ch = b.channel()
        x.do("other_" + label, lambda: op(ch))
    ch = b.channel()
    x.do("other_publish", lambda: x.publish_sync(ch, "", q, b"from b"))
    x.do("owner_counts", lambda: cha.queue_declare(q, passive=True))
    x.do("owner_close", lambda: a.close())
    ch = b.channel()
    x.do("after_owner_closed_passive", lambda: ch.queue_declare(q, passive=True))


@scenario
def queue_equivalence_flags(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    x.do("same", lambda: ch.queue_declare(q))
    x.do("durable_mismatch", lambda: ch.queue_declare(q, durable=True))
    ch = c.channel()
    x.do("auto_delete_mismatch", lambda: ch.queue_declare(q, auto_delete=True))
    ch = c.channel()
    x.do("exclusive_mismatch_same_connection", lambda: ch.queue_declare(q, exclusive=True))
    ch = c.channel()
    qe = x.name("qe")
    x.do("declare_exclusive", lambda: ch.queue_declare(qe, exclusive=True))
    x.do("exclusive_redeclared_non_exclusive", lambda: ch.queue_declare(qe))
    ch = c.channel()
    qd = x.name("qd")
    x.do("declare_durable", lambda: ch.queue_declare(qd, durable=True))
    x.do("durable_redeclared_transient", lambda: ch.queue_declare(qd))
    ch = c.channel()
    x.do("delete_durable", lambda: ch.queue_delete(qd))


@scenario
def queue_equivalence_arguments(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q, arguments={"x-message-ttl": 1000,
                                                           "x-foo": "bar"}))
    steps = [
        ("same", {"x-message-ttl": 1000, "x-foo": "bar"}),
        ("ttl_other_width_long", {"x-message-ttl": raw_int("l", 1000), "x-foo": "bar"}),
        ("ttl_other_width_short", {"x-message-ttl": raw_int("s", 1000), "x-foo": "bar"}),
        ("unknown_arg_differs", {"x-message-ttl": 1000, "x-foo": "baz"}),
        ("unknown_arg_missing", {"x-message-ttl": 1000}),
        ("unknown_arg_added", {"x-message-ttl": 1000, "x-foo": "bar", "x-other": 1}),
        ("ttl_differs", {"x-message-ttl": 2000, "x-foo": "bar"}),
        ("ttl_missing", {"x-foo": "bar"}),
        ("ttl_as_string", {"x-message-ttl": "1000", "x-foo": "bar"}),
        ("max_length_added", {"x-message-ttl": 1000, "x-max-length": 5}),
        ("dlx_added", {"x-message-ttl": 1000, "x-dead-letter-exchange": "dlx"}),
        ("queue_mode_added", {"x-message-ttl": 1000, "x-queue-mode": "lazy"}),
    ]
    for label, args in steps:
        ch = c.channel()
        x.do(label, lambda: ch.queue_declare(q, arguments=args))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_message_ttl_zero(x):
    c = x.connect()
    ch = c.channel()
    q, dlq = x.name("q"), x.name("dlq")
    x.do("declare_dlq", lambda: ch.queue_declare(dlq))
    x.do("declare", lambda: ch.queue_declare(q, arguments={
        "x-message-ttl": 0, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}))
    x.do("publish", lambda: x.publish_sync(ch, "", q, b"gone"))
    x.pump(c, 0.2)
    x.get("get_after_publish", ch, q)
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.get("dead_lettered", ch, dlq, auto_ack=True)
    since = x.mark(c)
    x.consume(c, ch, q, auto_ack=True, consumer_tag="live")
    x.do("publish_with_consumer", lambda: x.publish_sync(ch, "", q, b"live"))
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 1, 1.0)
    x.note("delivered_with_consumer", x.events(c, since, ch, ("Basic.Deliver",)))
    x.get("dlq_after_consumer", ch, dlq, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_max_length_zero(x):
    c = x.connect()
    ch = c.channel()
    q, qr = x.name("q"), x.name("qr")
    x.do("declare_drop_head", lambda: ch.queue_declare(q, arguments={"x-max-length": 0}))
    x.do("publish", lambda: x.publish_sync(ch, "", q, b"dropped"))
    x.get("get", ch, q)
    x.do("declare_reject_publish", lambda: ch.queue_declare(qr, arguments={
        "x-max-length": 0, "x-overflow": "reject-publish"}))
    ch.confirm_delivery()
    x.do("confirmed_publish", lambda: ch.basic_publish("", qr, b"refused"))
    x.do("counts", lambda: ch.queue_declare(qr, passive=True))


@scenario
def queue_overflow_drop_head(x):
    c = x.connect()
    ch = c.channel()
    q, dlq = x.name("q"), x.name("dlq")
    x.do("declare_dlq", lambda: ch.queue_declare(dlq))
    x.do("declare", lambda: ch.queue_declare(q, arguments={
        "x-max-length": 2, "x-overflow": "drop-head", "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": dlq}))
    for i in range(1, 5):
        ch.basic_publish("", q, str(i).encode(), P(headers={"n": i}))
    x.barrier(ch)
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    gets(x, "kept", ch, q, 3)
    x.pump(c, 0.1)
    gets(x, "dead_lettered", ch, dlq, 3)


@scenario
def queue_max_length_bytes(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q, arguments={"x-max-length-bytes": 10}))
    for body in (b"aaaa", b"bbbb", b"cccc"):
        ch.basic_publish("", q, body)
    x.barrier(ch)
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    bodies(x, "kept", ch, q)


@scenario
def queue_overflow_reject_publish(x):
    c = x.connect()
    ch = c.channel()
    q, qx, dlq = x.name("q"), x.name("qx"), x.name("dlq")
    x.do("declare", lambda: ch.queue_declare(q, arguments={
        "x-max-length": 2, "x-overflow": "reject-publish"}))
    ch.confirm_delivery()
    for i in range(1, 4):
        x.do("publish_%d" % i, lambda: ch.basic_publish("", q, str(i).encode()))
    x.get("get_one", ch, q, auto_ack=True)
    x.do("publish_after_room", lambda: ch.basic_publish("", q, b"4"))
    bodies(x, "left", ch, q)
    x.do("declare_dlq", lambda: ch.queue_declare(dlq))
    x.do("declare_reject_publish_dlx", lambda: ch.queue_declare(qx, arguments={
        "x-max-length": 1, "x-overflow": "reject-publish-dlx",
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}))
    x.do("dlx_publish_1", lambda: ch.basic_publish("", qx, b"a"))
    x.do("dlx_publish_2", lambda: ch.basic_publish("", qx, b"b"))
    x.pump(c, 0.1)
    gets(x, "dlq_contents", ch, dlq, 2)
    ch = c.channel()
    x.do("bad_overflow_value", lambda: ch.queue_declare(x.name("bad"), arguments={
        "x-max-length": 1, "x-overflow": "bogus"}))


@scenario
def queue_expires(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q, arguments={"x-expires": 300}))
    x.do("passive_soon", lambda: ch.queue_declare(q, passive=True))
    x.pump(c, 1.0)
    x.do("passive_after_expiry", lambda: ch.queue_declare(q, passive=True))
    for label, value in (("zero", 0), ("negative", -1), ("string", "100")):
        ch = c.channel()
        x.do("x_expires_" + label, lambda: ch.queue_declare(
            x.name(label), arguments={"x-expires": value}))


@scenario
def queue_unknown_arguments(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    args = {"x-foo": "bar", "x-queue-mode": "lazy", "x-ha-policy": "all",
            "x-nested": {"a": 1}, "plain": [1, "two"]}
    x.do("declare", lambda: ch.queue_declare(q, arguments=args))
    x.do("redeclare_other_unknown", lambda: ch.queue_declare(q, arguments={
        "x-foo": "zzz", "x-queue-mode": "lazy"}))
    x.do("redeclare_known_only", lambda: ch.queue_declare(q, arguments={"x-queue-mode": "lazy"}))
    x.do("passive", lambda: ch.queue_declare(q, passive=True))
    x.do("publish_get", lambda: (x.publish_sync(ch, "", q, b"m"),
                                 render_get(ch.basic_get(q, auto_ack=True)))[1])
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_type_quorum(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    qa = {"x-queue-type": "quorum"}
    x.do("declare", lambda: ch.queue_declare(q, durable=True, arguments=qa))
    x.do("redeclare", lambda: ch.queue_declare(q, durable=True, arguments=qa))
    x.do("publish", lambda: x.publish_sync(ch, "", q, b"qq", P(headers={"h": "v"})))
    x.get("get_first", ch, q)
    x.do("reject_requeue", lambda: (ch.basic_reject(1, requeue=True), x.barrier(ch)))
    x.get("get_redelivered", ch, q)
    x.do("ack", lambda: (ch.basic_ack(2), x.barrier(ch)))
    for label, kw in (("redeclare_classic", dict(durable=True,
                                                 arguments={"x-queue-type": "classic"})),
                      ("redeclare_no_type", dict(durable=True)),
                      ("non_durable", dict(queue=x.name("nd"), arguments=qa)),
                      ("exclusive", dict(queue=x.name("ex"), durable=True, exclusive=True,
                                         arguments=qa)),
                      ("auto_delete", dict(queue=x.name("ad"), durable=True, auto_delete=True,
                                           arguments=qa))):
        ch = c.channel()
        kw.setdefault("queue", q)
        x.do(label, lambda: ch.queue_declare(**kw))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_type_classic_and_unknown(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare_classic", lambda: ch.queue_declare(q, arguments={"x-queue-type": "classic"}))
    x.do("redeclare_without_type", lambda: ch.queue_declare(q))
    ch = c.channel()
    x.do("redeclare_quorum", lambda: ch.queue_declare(q, arguments={"x-queue-type": "quorum"}))
    ch = c.channel()
    x.do("unknown_type", lambda: ch.queue_declare(x.name("u"),
                                                  arguments={"x-queue-type": "bogus"}))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_type_stream(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare_stream", lambda: ch.queue_declare(q, durable=True,
                                                    arguments={"x-queue-type": "stream"}))
    ch = c.channel()
    x.do("get", lambda: ch.basic_get(q))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_max_priority(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q, arguments={"x-max-priority": 10}))
    for body, prio in ((b"p1", 1), (b"none", None), (b"p9", 9), (b"p5", 5), (b"p20", 20)):
        ch.basic_publish("", q, body, P(priority=prio))
    x.barrier(ch)
    bodies(x, "order", ch, q)
    ch = c.channel()
    x.do("max_priority_256", lambda: ch.queue_declare(x.name("big"),
                                                      arguments={"x-max-priority": 256}))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_max_priority_requeue(x):
    """A priority queue: taken messages nacked with requeue go back to the head of their own
    priority; a consumer gets the highest first; basic.get counts every priority; and the
    argument's other values: 0, a string, a redeclaration with another maximum."""
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q, arguments={"x-max-priority": 3}))
    for body, prio in ((b"a1", 1), (b"b3", 3), (b"c1", 1), (b"d3", 3), (b"e0", 0), (b"f2", 2)):
        ch.basic_publish("", q, body, P(priority=prio))
    x.barrier(ch)
    x.get("get_1", ch, q)
    x.get("get_2", ch, q)
    x.get("get_3", ch, q)
    x.do("nack_requeue", lambda: (ch.basic_nack(0, multiple=True, requeue=True), x.barrier(ch)))
    x.do("qos", lambda: ch.basic_qos(prefetch_count=10))
    s = x.mark(c)
    x.do("consume", lambda: x.consume(c, ch, q, consumer_tag="all", auto_ack=True))
    x.pump(c, 0.3)
    x.note("delivered", [(e["body"], e["redelivered"])
                         for e in x.events(c, s, ch, ("Basic.Deliver",))])
    x.do("cancel", lambda: x.cancel(c, ch, "all"))
    ch = c.channel()
    x.do("redeclare_other_max", lambda: ch.queue_declare(q, arguments={"x-max-priority": 4}))
    ch = c.channel()
    x.do("declare_zero", lambda: ch.queue_declare(x.name("zero"),
                                                  arguments={"x-max-priority": 0}))
    for body, prio in ((b"z5", 5), (b"z0", 0), (b"z9", 9)):
        ch.basic_publish("", x.name("zero"), body, P(priority=prio))
    x.barrier(ch)
    bodies(x, "zero_order", ch, x.name("zero"))
    x.do("delete_zero", lambda: ch.queue_delete(x.name("zero")))
    ch = c.channel()
    x.do("declare_string", lambda: ch.queue_declare(x.name("s"),
                                                    arguments={"x-max-priority": "5"}))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_declare_invalid_arguments(x):
    c = x.connect()
    cases = [
        ("ttl_negative", {"x-message-ttl": -1}),
        ("ttl_string", {"x-message-ttl": "abc"}),
        ("max_length_negative", {"x-max-length": -1}),
        ("max_length_string", {"x-max-length": "5"}),
        ("max_length_bytes_negative", {"x-max-length-bytes": -1}),
        ("dlrk_without_dlx", {"x-dead-letter-routing-key": "k"}),
        ("dlx_not_string", {"x-dead-letter-exchange": 5}),
        ("max_priority_negative", {"x-max-priority": -1}),
        ("ttl_long", {"x-message-ttl": raw_int("l", 2 ** 33)}),
    ]
    for label, args in cases:
        ch = c.channel()
        x.do(label, lambda: ch.queue_declare(x.name(label), arguments=args))


# ==============================================================================================
# exchange.declare / delete / bind

@scenario
def exchange_declare_types(x):
    c = x.connect()
    ch = c.channel()
    for t in ("direct", "fanout", "topic", "headers"):
        e = x.name(t)
        x.do("declare_" + t, lambda: ch.exchange_declare(e, t))
        x.do("redeclare_" + t, lambda: ch.exchange_declare(e, t))
        x.do("passive_" + t, lambda: ch.exchange_declare(e, t, passive=True))
        x.do("passive_other_type_" + t, lambda: ch.exchange_declare(e, "fanout", passive=True))
        x.do("delete_" + t, lambda: ch.exchange_delete(e))


@scenario
def exchange_declare_bad_type(x):
    c = x.connect()
    ch = c.channel()
    x.do("unknown_type", lambda: ch.exchange_declare(x.name("e"), "nope"))
    c = x.connect()
    ch = c.channel()
    x.do("delayed_message_type", lambda: ch.exchange_declare(
        x.name("d"), "x-delayed-message", arguments={"x-delayed-type": "direct"}))
    c = x.connect()
    ch = c.channel()
    x.do("passive_unknown_type_missing", lambda: ch.exchange_declare(x.name("p"), "nope",
                                                                    passive=True))


@scenario
def exchange_amq_and_default(x):
    c = x.connect()
    steps = [
        ("amq_direct_same", lambda ch: ch.exchange_declare("amq.direct", "direct",
                                                           durable=True)),
        ("amq_direct_transient", lambda ch: ch.exchange_declare("amq.direct", "direct")),
        ("amq_fanout_as_direct", lambda ch: ch.exchange_declare("amq.fanout", "direct",
                                                                durable=True)),
        ("amq_topic_passive", lambda ch: ch.exchange_declare("amq.topic", passive=True)),
        ("amq_headers_passive", lambda ch: ch.exchange_declare("amq.headers", passive=True)),
        ("amq_match_passive", lambda ch: ch.exchange_declare("amq.match", passive=True)),
        ("amq_new_name", lambda ch: ch.exchange_declare("amq.cx-new", "direct")),
        ("amq_new_name_passive", lambda ch: ch.exchange_declare("amq.cx-new", passive=True)),
        ("default_declare", lambda ch: ch.exchange_declare("", "direct", durable=True)),
        ("default_passive", lambda ch: ch.exchange_declare("", passive=True)),
        ("default_delete", lambda ch: ch.exchange_delete("")),
        ("amq_direct_delete", lambda ch: ch.exchange_delete("amq.direct")),
        ("amq_missing_delete", lambda ch: ch.exchange_delete("amq.cx-missing")),
    ]
    for label, op in steps:
        ch = c.channel()
        x.do(label, lambda: op(ch))


@scenario
def exchange_passive_missing(x):
    c = x.connect()
    ch = c.channel()
    x.do("passive_missing", lambda: ch.exchange_declare(x.name("e"), passive=True))
    ch = c.channel()
    x.do("delete_missing", lambda: ch.exchange_delete(x.name("e")))
    x.do("delete_missing_if_unused", lambda: ch.exchange_delete(x.name("e"), if_unused=True))


@scenario
def exchange_equivalence(x):
    c = x.connect()
    ch = c.channel()
    e = x.name("e")
    x.do("declare", lambda: ch.exchange_declare(e, "direct"))
    cases = [
        ("type_mismatch", dict(exchange_type="fanout")),
        ("durable_mismatch", dict(exchange_type="direct", durable=True)),
        ("auto_delete_mismatch", dict(exchange_type="direct", auto_delete=True)),
        ("internal_mismatch", dict(exchange_type="direct", internal=True)),
        ("ae_added", dict(exchange_type="direct", arguments={"alternate-exchange": "ae"})),
        ("unknown_arg_added", dict(exchange_type="direct", arguments={"x-foo": 1})),
    ]
    for label, kw in cases:
        ch = c.channel()
        x.do(label, lambda: ch.exchange_declare(e, **kw))
    ch = c.channel()
    x.do("delete", lambda: ch.exchange_delete(e))


@scenario
def exchange_internal(x):
    c = x.connect()
    ch = c.channel()
    ei, ep, q = x.name("internal"), x.name("public"), x.name("q")
    x.do("declare_internal", lambda: ch.exchange_declare(ei, "fanout", internal=True))
    x.do("declare_public", lambda: ch.exchange_declare(ep, "fanout"))
    x.do("declare_q", lambda: ch.queue_declare(q))
    x.do("bind_q", lambda: ch.queue_bind(q, ei))
    x.do("bind_e2e", lambda: ch.exchange_bind(ei, ep))
    x.do("publish_public", lambda: x.publish_sync(ch, ep, "", b"via public"))
    bodies(x, "q_contents", ch, q)
    x.do("publish_internal", lambda: x.publish_sync(ch, ei, "", b"direct to internal"))
    ch = c.channel()
    x.do("passive_internal", lambda: ch.exchange_declare(ei, passive=True))
    x.do("delete", lambda: (ch.exchange_delete(ep), ch.exchange_delete(ei), ch.queue_delete(q)))


@scenario
def exchange_alternate(x):
    c = x.connect()
    ch = c.channel()
    ae, main, qae, qm = x.name("ae"), x.name("main"), x.name("qae"), x.name("qm")
    x.do("declare_ae", lambda: ch.exchange_declare(ae, "fanout"))
    x.do("declare_main", lambda: ch.exchange_declare(main, "direct",
                                                     arguments={"alternate-exchange": ae}))
    x.do("declare_queues", lambda: (ch.queue_declare(qae), ch.queue_declare(qm)))
    x.do("bind", lambda: (ch.queue_bind(qae, ae), ch.queue_bind(qm, main, "k")))
    ch.confirm_delivery()
    x.do("publish_routed", lambda: ch.basic_publish(main, "k", b"routed", mandatory=True))
    x.do("publish_unrouted_mandatory", lambda: ch.basic_publish(main, "other", b"to ae",
                                                                mandatory=True))
    bodies(x, "qm", ch, qm)
    bodies(x, "qae", ch, qae)
    e2 = x.name("dangling")
    x.do("declare_dangling_ae", lambda: ch.exchange_declare(
        e2, "direct", arguments={"alternate-exchange": x.name("missing-ae")}))
    x.do("publish_dangling_mandatory", lambda: ch.basic_publish(e2, "k", b"lost",
                                                                mandatory=True))
    x.do("delete", lambda: (ch.exchange_delete(main), ch.exchange_delete(ae),
                            ch.exchange_delete(e2)))


@scenario
def exchange_delete_rules(x):
    c = x.connect()
    ch = c.channel()
    e, e2, q = x.name("e"), x.name("e2"), x.name("q")
    x.do("declare", lambda: (ch.exchange_declare(e, "direct"), ch.exchange_declare(e2, "fanout"),
                             ch.queue_declare(q)))
    x.do("bind", lambda: ch.queue_bind(q, e, "k"))
    x.do("delete_if_unused_bound", lambda: ch.exchange_delete(e, if_unused=True))
    ch = c.channel()
    x.do("unbind", lambda: ch.queue_unbind(q, e, "k"))
    x.do("delete_if_unused_free", lambda: ch.exchange_delete(e, if_unused=True))
    x.do("passive_deleted", lambda: ch.exchange_declare(e, passive=True))
    ch = c.channel()
    x.do("e2e_source", lambda: (ch.exchange_declare(e, "direct"), ch.exchange_bind(e2, e, "k")))
    x.do("delete_source_if_unused", lambda: ch.exchange_delete(e, if_unused=True))
    ch = c.channel()
    x.do("delete_destination_if_unused", lambda: ch.exchange_delete(e2, if_unused=True))
    ch = c.channel()
    x.do("delete_source", lambda: ch.exchange_delete(e))
    x.do("delete_destination_if_unused_after", lambda: ch.exchange_delete(e2, if_unused=True))
    x.do("delete_q", lambda: ch.queue_delete(q))


@scenario
def exchange_to_exchange_bindings(x):
    c = x.connect()
    ch = c.channel()
    e1, e2, q = x.name("e1"), x.name("e2"), x.name("q")
    x.do("declare", lambda: (ch.exchange_declare(e1, "topic"), ch.exchange_declare(e2, "fanout"),
                             ch.queue_declare(q), ch.queue_bind(q, e2)))
    x.do("bind", lambda: ch.exchange_bind(e2, e1, "a.*"))
    x.do("bind_again", lambda: ch.exchange_bind(e2, e1, "a.*"))
    for rk in ("a.b", "b.c", "a.b.c"):
        ch.basic_publish(e1, rk, rk.encode())
    x.barrier(ch)
    bodies(x, "routed", ch, q)
    x.do("unbind", lambda: ch.exchange_unbind(e2, e1, "a.*"))
    x.do("unbind_missing_binding", lambda: ch.exchange_unbind(e2, e1, "zzz"))
    x.do("publish_after_unbind", lambda: x.publish_sync(ch, e1, "a.b", b"late"))
    bodies(x, "after_unbind", ch, q)
    for label, dst, src in (("missing_source", e2, x.name("nosrc")),
                            ("missing_destination", x.name("nodst"), e1),
                            ("default_source", e2, ""), ("default_destination", "", e1)):
        ch = c.channel()
        x.do("bind_" + label, lambda: ch.exchange_bind(dst, src, "k"))
    ch = c.channel()
    x.do("cycle", lambda: (ch.exchange_bind(e1, e2, "#"), ch.exchange_bind(e2, e1, "#"),
                           x.publish_sync(ch, e1, "x.y", b"cycle")))
    bodies(x, "after_cycle", ch, q)
    x.do("delete", lambda: (ch.exchange_delete(e1), ch.exchange_delete(e2), ch.queue_delete(q)))


@scenario
def routing_headers_exchange(x):
    c = x.connect()
    ch = c.channel()
    e = x.name("e")
    x.do("declare", lambda: ch.exchange_declare(e, "headers"))
    binds = {
        "all": {"x-match": "all", "a": 1, "b": "x"},
        "any": {"x-match": "any", "a": 1, "c": "z"},
        "default_all": {"a": 1},
        "all_with_x": {"x-match": "all-with-x", "x-k": "v"},
        "any_with_x": {"x-match": "any-with-x", "x-k": "v", "zz": 1},
        "all_ignores_x": {"x-match": "all", "x-k": "v"},
        "void": {"x-match": "all", "n": None},
        "empty": {},
    }
    for k, args in binds.items():
        q = x.name("q-" + k)
        x.do("bind_" + k, lambda: (ch.queue_declare(q), ch.queue_bind(q, e, "", arguments=args)))
    pubs = [
        ("m1", {"a": 1, "b": "x"}),
        ("m2", {"a": 1}),
        ("m3", {"c": "z"}),
        ("m4", {"a": raw_int("b", 1), "b": "x"}),
        ("m5", {"a": raw_int("l", 1), "b": "x"}),
        ("m5x", {"a": 1, "b": b"x"}),
        ("m6", {"x-k": "v"}),
        ("m7", {"n": None}),
        ("m8", None),
        ("m9", {"a": "1"}),
    ]
    for body, headers in pubs:
        ch.basic_publish(e, "", body.encode(), P(headers=headers))
    x.barrier(ch)
    for k in binds:
        bodies(x, "got_" + k, ch, x.name("q-" + k))
    x.do("bad_x_match", lambda: ch.queue_bind(x.name("q-all"), e, "",
                                              arguments={"x-match": "bogus"}))
    ch = c.channel()
    x.do("delete", lambda: ([ch.queue_delete(x.name("q-" + k)) for k in binds],
                            ch.exchange_delete(e))[1])


@scenario
def routing_topic_and_direct(x):
    c = x.connect()
    ch = c.channel()
    e = x.name("t")
    x.do("declare", lambda: ch.exchange_declare(e, "topic"))
    patterns = ["a.*", "a.#", "#", "*.b", "a.b.c", "*", "#.c", "a.*.c"]
    for i, pat in enumerate(patterns):
        q = x.name("q%d" % i)
        x.do("bind_" + pat, lambda: (ch.queue_declare(q), ch.queue_bind(q, e, pat)))
    for rk in ("a", "a.b", "a.b.c", "x.b", "a.x.c", "", "c"):
        ch.basic_publish(e, rk, ("rk=" + rk).encode())
    x.barrier(ch)
    for i, pat in enumerate(patterns):
        bodies(x, "got_" + pat, ch, x.name("q%d" % i))
    qd = x.name("qd")
    x.do("direct_bind", lambda: (ch.queue_declare(qd), ch.queue_bind(qd, "amq.direct", "k1"),
                                 ch.queue_bind(qd, "amq.direct", "k2"),
                                 ch.queue_bind(qd, "amq.direct", "k2")))
    x.do("unbind_k2", lambda: ch.queue_unbind(qd, "amq.direct", "k2"))
    x.do("unbind_missing_binding", lambda: ch.queue_unbind(qd, "amq.direct", "nope"))
    for rk in ("k1", "k2", "k1"):
        ch.basic_publish("amq.direct", rk, rk.encode())
    x.barrier(ch)
    bodies(x, "direct_got", ch, qd)
    x.do("delete", lambda: ch.exchange_delete(e))


# ==============================================================================================
# queue.bind / unbind / purge / delete

@scenario
def queue_bind_errors(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    cases = [
        ("bind_missing_queue", lambda ch: ch.queue_bind(x.name("missing"), "amq.direct", "k")),
        ("bind_missing_exchange", lambda ch: ch.queue_bind(q, x.name("nox"), "k")),
        ("bind_default_exchange", lambda ch: ch.queue_bind(q, "", "k")),
        ("unbind_missing_exchange", lambda ch: ch.queue_unbind(q, x.name("nox"), "k")),
        ("unbind_missing_queue", lambda ch: ch.queue_unbind(x.name("missing"), "amq.direct",
                                                            "k")),
        ("unbind_default_exchange", lambda ch: ch.queue_unbind(q, "", q)),
    ]
    for label, op in cases:
        ch = c.channel()
        x.do(label, lambda: op(ch))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_purge(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    for i in range(3):
        ch.basic_publish("", q, b"m%d" % i)
    x.barrier(ch)
    x.get("get_unacked", ch, q)
    x.do("purge", lambda: ch.queue_purge(q))
    x.do("purge_empty", lambda: ch.queue_purge(q))
    x.do("counts_after_purge", lambda: ch.queue_declare(q, passive=True))
    x.do("close_channel", lambda: ch.close())
    ch = c.channel()
    x.do("counts_after_close", lambda: ch.queue_declare(q, passive=True))
    x.get("get_requeued", ch, q, auto_ack=True)
    x.do("purge_missing", lambda: ch.queue_purge(x.name("missing")))
    ch = c.channel()
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def queue_delete_conditions(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    ch.basic_publish("", q, b"1")
    ch.basic_publish("", q, b"2")
    x.barrier(ch)
    x.do("delete_if_empty_nonempty", lambda: ch.queue_delete(q, if_empty=True))
    ch = c.channel()
    cch = c.channel()
    cch.basic_qos(prefetch_count=1)
    x.consume(c, cch, q, consumer_tag="holder")
    x.do("delete_if_unused_consumed", lambda: ch.queue_delete(q, if_unused=True))
    ch = c.channel()
    x.do("delete_missing", lambda: ch.queue_delete(x.name("missing")))
    x.do("delete_missing_if_empty", lambda: ch.queue_delete(x.name("missing"), if_empty=True))
    x.do("cancel_holder", lambda: x.cancel(c, cch, "holder"))
    x.do("delete_with_messages", lambda: ch.queue_delete(q))
    x.do("passive_deleted", lambda: ch.queue_declare(q, passive=True))


@scenario
def queue_empty_name_shortcut(x):
    c = x.connect()
    ch = c.channel()
    x.do("bind_empty_before_declare", lambda: ch.queue_bind("", "amq.direct", "k"))
    ch = c.channel()
    x.do("get_empty_before_declare", lambda: ch.basic_get(""))
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    x.do("bind_empty_name_empty_key", lambda: ch.queue_bind("", "amq.direct", ""))
    x.do("publish_to_queue_name_key", lambda: x.publish_sync(ch, "amq.direct", q, b"shortcut"))
    x.get("get_empty_name", ch, "", auto_ack=True)
    ch.basic_publish("", q, b"again")
    x.barrier(ch)
    x.do("purge_empty_name", lambda: ch.queue_purge(""))
    x.do("unbind_empty_name", lambda: ch.queue_unbind("", "amq.direct", q))
    x.do("consume_empty_name", lambda: x.raw(c, ch, spec.Basic.Consume(queue="",
                                                                      consumer_tag="sc"),
                                            replies=("Basic.ConsumeOk",)))
    x.do("cancel", lambda: x.raw(c, ch, spec.Basic.Cancel(consumer_tag="sc"),
                                 replies=("Basic.CancelOk",)))
    x.do("delete_empty_name", lambda: ch.queue_delete(""))
    x.do("passive_after_delete", lambda: ch.queue_declare(q, passive=True))
    ch = c.channel()
    x.do("declare_again", lambda: ch.queue_declare(q))
    x.do("passive_empty_name", lambda: ch.queue_declare("", passive=True))
    ch = c.channel()
    x.do("declare_server_named", lambda: ch.queue_declare("", exclusive=True))
    x.do("bind_shortcut_server_named", lambda: ch.queue_bind("", "amq.fanout"))
    x.do("publish_fanout", lambda: x.publish_sync(ch, "amq.fanout", "", b"fan"))
    x.get("get_shortcut_server_named", ch, "", auto_ack=True)
    x.do("delete_last", lambda: ch.queue_delete(q))


# ==============================================================================================
# basic.publish

@scenario
def publish_mandatory_unroutable(x):
    c = x.connect()
    ch = c.channel()
    since = x.mark(c)
    x.do("plain_mandatory_unroutable", lambda: x.publish_sync(
        ch, "amq.direct", "nowhere", b"plain", P(message_id="m0"), mandatory=True))
    x.note("plain_events", x.events(c, since, ch, ("Basic.Return", "Basic.Ack", "Basic.Nack")))
    ch.confirm_delivery()
    since = x.mark(c)
    x.do("confirm_mandatory_unroutable", lambda: ch.basic_publish(
        "amq.direct", "nowhere", b"confirm", P(message_id="m1", headers={"k": "v"}),
        mandatory=True))
    x.do("confirm_unroutable_not_mandatory", lambda: ch.basic_publish(
        "amq.direct", "nowhere", b"dropped"))
    x.do("confirm_default_exchange_missing_queue", lambda: ch.basic_publish(
        "", x.name("missing"), b"nobody", mandatory=True))
    x.note("confirm_events", x.events(c, since, ch, ("Basic.Return", "Basic.Ack",
                                                     "Basic.Nack")))


@scenario
def publish_immediate(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    x.do("publish_immediate", lambda: x.raw(
        c, ch, spec.Basic.Publish(exchange="", routing_key=q, immediate=True),
        (P(), b"now"), replies=("Basic.Return",)))


@scenario
def publish_bad_expiration(x):
    c = x.connect()
    q = x.name("q")
    ch = c.channel()
    x.do("declare", lambda: ch.queue_declare(q))
    for label, exp in (("letters", "abc"), ("negative", "-1"), ("fraction", "1.5"),
                       ("empty", ""), ("space", " 100"), ("huge", "99999999999999999999")):
        ch = c.channel()
        x.do(label, lambda: x.publish_sync(ch, "", q, b"m", P(expiration=exp)))
    ch = c.channel()
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def publish_user_id(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    x.do("matching_user_id", lambda: x.publish_sync(ch, "", q, b"ok", P(user_id="guest")))
    x.get("get", ch, q, auto_ack=True)
    x.do("other_user_id", lambda: x.publish_sync(ch, "", q, b"bad", P(user_id="bob")))
    ch = c.channel()
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def publish_missing_exchange(x):
    c = x.connect()
    ch = c.channel()
    x.do("publish", lambda: x.publish_sync(ch, x.name("nox"), "k", b"m"))
    ch = c.channel()
    ch.confirm_delivery()
    x.do("publish_confirm_mode", lambda: ch.basic_publish(x.name("nox"), "k", b"m"))


@scenario
def publish_headers_round_trip(x):
    """Every field type letter in the headers table, through a queue and back."""
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    headers = {
        "t_true": True, "t_false": False,
        "b": raw_int("b", -5), "B": raw_int("B", 250), "s": raw_int("s", -300),
        "u": raw_int("u", 65000), "I": raw_int("I", -70000), "i": raw_int("i", 4000000000),
        "l": raw_int("l", -(1 << 40)), "L": Raw("L", struct.pack(">q", 1 << 50)),
        "f": Raw("f", struct.pack(">f", 1.5)), "d": Raw("d", struct.pack(">d", -2.25)),
        "D": decimal.Decimal("3.14"), "S": "héllo", "S_binary": Raw("S", b"\x00\x00\x00\x02\xff\xfe"),
        "x": b"\x00\x01\xff", "T": datetime.datetime(2020, 1, 2, 3, 4, 5),
        "F": {"nested": {"deep": 1}, "empty": {}}, "A": [1, "two", None, [3], {"k": "v"}],
        "A_empty": [], "V": None, "S_empty": "",
    }
    x.do("publish", lambda: x.publish_sync(ch, "", q, b"typed", P(headers=headers)))
    x.get("get", ch, q, auto_ack=True)
    x.do("publish_empty_table", lambda: x.publish_sync(ch, "", q, b"empty", P(headers={})))
    x.get("get_empty_table", ch, q, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def publish_headers_odd_values(x):
    """Values RabbitMQ's parser treats specially: U (not in RabbitMQ's parser), t octet 2.
    Each publish on its own connection, since one may close it."""
    q = x.name("q")
    c = x.connect()
    ch = c.channel()
    x.do("declare", lambda: ch.queue_declare(q))
    for label, value in (("U", raw_int("U", -2)), ("bool_2", Raw("t", b"\x02"))):
        c = x.connect()
        ch = c.channel()
        x.do("publish_" + label, lambda: x.publish_sync(ch, "", q, label.encode(),
                                                        P(headers={label: value})))
        x.get("get_" + label, ch, q, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def publish_properties_round_trip(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    props = P(content_type="application/json", content_encoding="gzip", headers={"h": 1},
              delivery_mode=2, priority=7, correlation_id="corr", reply_to="reply.q",
              expiration="60000", message_id="mid", timestamp=1700000000, type="kind",
              user_id="guest", app_id="app", cluster_id="cluster")
    x.do("publish_all", lambda: x.publish_sync(ch, "", q, b"all", props))
    x.get("get_all", ch, q, auto_ack=True)
    x.do("publish_none", lambda: x.publish_sync(ch, "", q, b"none"))
    x.get("get_none", ch, q, auto_ack=True)
    x.do("publish_empty_strings", lambda: x.publish_sync(
        ch, "", q, b"blank", P(content_type="", correlation_id="", delivery_mode=1)))
    x.get("get_empty_strings", ch, q, auto_ack=True)
    since = x.mark(c)
    x.consume(c, ch, q, auto_ack=True, consumer_tag="pc")
    x.do("publish_consumed", lambda: x.publish_sync(ch, "", q, b"consumed", props))
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 1, 1.0)
    x.note("delivered", x.events(c, since, ch, ("Basic.Deliver",)))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def publish_body_sizes(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    big = bytes(range(256)) * 1200  # 307200 bytes: several frames at frame-max 131072
    for label, body in (("empty", b""), ("one", b"x"), ("frame_edge", b"y" * (131072 - 8)),
                        ("big", big)):
        x.do("publish_" + label, lambda: x.publish_sync(ch, "", q, body))
        x.get("get_" + label, ch, q, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


# ==============================================================================================
# basic.get

@scenario
def basic_get_counts(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    for i in range(3):
        ch.basic_publish("", q, b"m%d" % i, P(delivery_mode=2 if i == 1 else 1))
    x.barrier(ch)
    x.get("get1", ch, q)
    x.get("get2_no_ack", ch, q, auto_ack=True)
    x.get("get3", ch, q)
    x.get("get_empty", ch, q)
    x.do("counts_with_unacked", lambda: ch.queue_declare(q, passive=True))
    x.do("ack_3", lambda: (ch.basic_ack(3), x.barrier(ch)))
    x.do("get_missing_queue", lambda: ch.basic_get(x.name("missing")))
    ch = c.channel()
    x.do("counts_after_close_requeue", lambda: ch.queue_declare(q, passive=True))
    x.get("get_redelivered", ch, q, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


# ==============================================================================================
# basic.consume / cancel

@scenario
def consume_deliveries_and_cancel(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    for i in range(3):
        ch.basic_publish("", q, b"m%d" % i)
    x.barrier(ch)
    since = x.mark(c)
    x.do("consume", lambda: x.consume(c, ch, q, consumer_tag="tagA"))
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 3, 1.0)
    x.note("deliveries", x.events(c, since, ch))
    x.do("counts_while_consuming", lambda: ch.queue_declare(q, passive=True))
    since = x.mark(c)
    x.do("cancel", lambda: x.raw(c, ch, spec.Basic.Cancel(consumer_tag="tagA"),
                                 replies=("Basic.CancelOk",)))
    x.do("ack_after_cancel", lambda: (ch.basic_ack(2), x.barrier(ch)))
    x.do("counts_after_cancel", lambda: ch.queue_declare(q, passive=True))
    since = x.mark(c)
    x.do("consume_server_tag", lambda: x.raw(c, ch, spec.Basic.Consume(queue=q, no_ack=True),
                                             replies=("Basic.ConsumeOk",)))
    x.do("publish", lambda: x.publish_sync(ch, "", q, b"late"))
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 1, 1.0)
    x.note("server_tag_events", x.events(c, since, ch, ("Basic.ConsumeOk", "Basic.Deliver")))
    ch2 = c.channel()
    x.do("close_first_channel", lambda: ch.close())
    x.do("counts_after_close", lambda: ch2.queue_declare(q, passive=True))
    gets(x, "requeued", ch2, q, 3)
    x.do("delete", lambda: ch2.queue_delete(q))


@scenario
def consume_exclusive_conflict(x):
    c = x.connect()
    ch1 = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch1.queue_declare(q))
    x.do("exclusive_consume", lambda: x.consume(c, ch1, q, exclusive=True,
                                                        consumer_tag="ex"))
    ch2 = c.channel()
    x.do("second_consumer", lambda: x.consume(c, ch2, q, consumer_tag="second"))
    ch2 = c.channel()
    x.do("second_exclusive", lambda: x.consume(c, ch2, q, exclusive=True,
                                                       consumer_tag="second"))
    ch2 = c.channel()
    x.do("get_while_exclusive", lambda: render_get(ch2.basic_get(q)))
    x.do("cancel_exclusive", lambda: x.cancel(c, ch1, "ex"))
    x.do("plain_consume", lambda: x.consume(c, ch1, q, consumer_tag="plain"))
    ch2 = c.channel()
    x.do("exclusive_when_others_exist", lambda: x.consume(c, ch2, q, exclusive=True,
                                                                  consumer_tag="late-ex"))
    ch2 = c.channel()
    x.do("delete", lambda: ch2.queue_delete(q))


@scenario
def consume_reuse_tag(x):
    c = x.connect()
    ch = c.channel()
    q, q2 = x.name("q"), x.name("q2")
    x.do("declare", lambda: (ch.queue_declare(q), ch.queue_declare(q2)))
    x.do("consume", lambda: x.consume(c, ch, q, consumer_tag="dup"))
    ch_other = c.channel()
    x.do("same_tag_other_channel", lambda: x.consume(c, ch_other, q, consumer_tag="dup"))
    x.do("same_tag_same_channel", lambda: x.raw(
        c, ch, spec.Basic.Consume(queue=q2, consumer_tag="dup"), replies=("Basic.ConsumeOk",)))


@scenario
def consume_cancel_unknown_and_missing_queue(x):
    c = x.connect()
    ch = c.channel()
    x.do("cancel_unknown", lambda: x.raw(c, ch, spec.Basic.Cancel(consumer_tag="never"),
                                         replies=("Basic.CancelOk",)))
    x.do("consume_missing_queue", lambda: x.consume(c, ch, x.name("missing"),
                                                           consumer_tag="t"))


@scenario
def consumer_cancel_notify(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    ch.basic_publish("", q, b"m")
    x.barrier(ch)
    since = x.mark(c)
    x.consume(c, ch, q, consumer_tag="watched")
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 1, 1.0)
    other = c.channel()
    x.do("delete_from_other_channel", lambda: other.queue_delete(q))
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Cancel") >= 1, 1.0)
    x.note("consumer_channel_events", x.events(c, since, ch))
    x.do("ack_after_queue_deleted", lambda: (ch.basic_ack(1), x.barrier(ch)))


@scenario
def direct_reply_to(x):
    """RabbitMQ's direct reply-to (amq.rabbitmq.reply-to), a core feature of 3.x."""
    c = x.connect()
    ch = c.channel()
    q = x.name("rpc")
    x.do("declare", lambda: ch.queue_declare(q))
    x.do("passive_pseudo_queue", lambda: ch.queue_declare("amq.rabbitmq.reply-to",
                                                          passive=True))
    x.do("publish_without_reply_consumer", lambda: x.publish_sync(
        ch, "", q, b"req0", P(reply_to="amq.rabbitmq.reply-to")))
    ch = c.channel()
    x.do("consume_with_acks", lambda: x.consume(c, ch, "amq.rabbitmq.reply-to",
                                                consumer_tag="rt-ack"))
    ch = c.channel()
    since = x.mark(c)
    x.do("consume_no_ack", lambda: x.consume(c, ch, "amq.rabbitmq.reply-to",
                                             consumer_tag="rt", auto_ack=True))
    x.do("consume_again", lambda: x.consume(c, ch, "amq.rabbitmq.reply-to",
                                            consumer_tag="rt2", auto_ack=True))
    ch = c.channel()
    since = x.mark(c)
    x.do("consume_no_ack_again", lambda: x.consume(c, ch, "amq.rabbitmq.reply-to",
                                                   consumer_tag="rt", auto_ack=True))
    x.do("publish_request", lambda: x.publish_sync(
        ch, "", q, b"req", P(reply_to="amq.rabbitmq.reply-to", correlation_id="c1")))
    server = x.connect()
    sch = server.channel()
    got = {}

    def serve():
        m, props, body = sch.basic_get(q, auto_ack=True)
        got["reply_to"] = props.reply_to
        sch.basic_publish("", props.reply_to, b"resp:" + body,
                          P(correlation_id=props.correlation_id))
        x.barrier(sch)
        return {"request_reply_to": props.reply_to, "body": body.decode()}
    x.do("serve_request", serve)
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 1, 1.0)
    x.note("reply_events", x.events(c, since, ch, ("Basic.Deliver",)))
    x.do("passive_reply_address", lambda: sch.queue_declare(got.get("reply_to", "x"),
                                                            passive=True))
    x.do("publish_to_unknown_reply_address", lambda: x.publish_sync(
        sch, "", "amq.rabbitmq.reply-to.nonsense", b"nobody"))
    x.do("delete", lambda: sch.queue_delete(q))


# ==============================================================================================
# ack / nack / reject / recover

def _three_unacked(x, ch, q, n=3):
    x.do("declare", lambda: ch.queue_declare(q))
    for i in range(1, n + 1):
        ch.basic_publish("", q, b"m%d" % i)
    x.barrier(ch)
    for _ in range(n):
        ch.basic_get(q)


@scenario
def ack_unknown_tag(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    _three_unacked(x, ch, q, 1)
    x.do("ack_unknown", lambda: (ch.basic_ack(5), x.barrier(ch)))
    ch = c.channel()
    x.do("reject_unknown", lambda: (ch.basic_reject(7), x.barrier(ch)))
    ch = c.channel()
    x.do("nack_unknown", lambda: (ch.basic_nack(9), x.barrier(ch)))
    ch = c.channel()
    x.do("ack_zero_single", lambda: (ch.basic_ack(0, multiple=False), x.barrier(ch)))
    ch = c.channel()
    x.do("ack_zero_multiple_nothing_outstanding", lambda: (ch.basic_ack(0, multiple=True),
                                                            x.barrier(ch)))
    ch = c.channel()
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def ack_double(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    _three_unacked(x, ch, q, 2)
    x.do("ack_1", lambda: (ch.basic_ack(1), x.barrier(ch)))
    x.do("ack_1_again", lambda: (ch.basic_ack(1), x.barrier(ch)))
    ch = c.channel()
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.get("requeued_after_close", ch, q, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def ack_multiple(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    _three_unacked(x, ch, q, 5)
    x.do("ack_3_multiple", lambda: (ch.basic_ack(3, multiple=True), x.barrier(ch)))
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.do("ack_2_after_multiple", lambda: (ch.basic_ack(2), x.barrier(ch)))
    ch = c.channel()
    x.do("counts_after_close", lambda: ch.queue_declare(q, passive=True))
    for _ in range(2):
        ch.basic_get(q)   # tags 1, 2 on the new channel
    x.do("ack_9_multiple_not_outstanding", lambda: (ch.basic_ack(9, multiple=True),
                                                    x.barrier(ch)))
    ch = c.channel()
    for _ in range(2):
        ch.basic_get(q)
    x.do("ack_0_multiple", lambda: (ch.basic_ack(0, multiple=True), x.barrier(ch)))
    x.do("counts_after_ack_all", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def ack_multiple_gap(x):
    """multiple=true with an already-acked tag in the middle of the range."""
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    _three_unacked(x, ch, q, 4)
    x.do("ack_2", lambda: (ch.basic_ack(2), x.barrier(ch)))
    x.do("ack_4_multiple", lambda: (ch.basic_ack(4, multiple=True), x.barrier(ch)))
    x.do("ack_2_multiple_again", lambda: (ch.basic_ack(2, multiple=True), x.barrier(ch)))
    ch = c.channel()
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def nack_reject_requeue(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    _three_unacked(x, ch, q, 4)
    x.do("reject_2_requeue", lambda: (ch.basic_reject(2, requeue=True), x.barrier(ch)))
    x.do("nack_4_multiple_requeue", lambda: (ch.basic_nack(4, multiple=True, requeue=True),
                                            x.barrier(ch)))
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    gets(x, "after_requeue", ch, q, 5, auto_ack=False)
    x.do("reject_5_drop", lambda: (ch.basic_reject(5, requeue=False), x.barrier(ch)))
    x.do("nack_0_multiple_drop", lambda: (ch.basic_nack(0, multiple=True, requeue=False),
                                         x.barrier(ch)))
    x.do("counts_after_drop", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def basic_recover(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    _three_unacked(x, ch, q, 2)
    x.do("recover_requeue", lambda: ch.basic_recover(requeue=True))
    gets(x, "after_recover", ch, q, 3, auto_ack=False)
    x.do("ack_old_tag_1", lambda: (ch.basic_ack(1), x.barrier(ch)))
    ch = c.channel()
    since = x.mark(c)
    x.consume(c, ch, q, consumer_tag="rc")
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 2, 1.0)
    since = x.mark(c)
    x.do("recover_with_consumer", lambda: ch.basic_recover(requeue=True))
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 2, 1.0)
    x.note("redelivered_to_consumer", x.events(c, since, ch, ("Basic.Deliver",)))
    x.do("recover_async", lambda: (x.raw(c, ch, spec.Basic.RecoverAsync(requeue=True)),
                                   x.barrier(ch))[1])
    x.do("recover_no_requeue", lambda: ch.basic_recover(requeue=False))


@scenario
def redelivered_after_channel_close(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    for i in range(1, 5):
        ch.basic_publish("", q, b"m%d" % i)
    x.barrier(ch)
    x.get("get_1", ch, q)
    ch.basic_qos(prefetch_count=2)
    since = x.mark(c)
    x.consume(c, ch, q, consumer_tag="rd")
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 2, 1.0)
    x.note("delivered", x.events(c, since, ch, ("Basic.Deliver",)))
    x.do("ack_delivery_3", lambda: (ch.basic_ack(3), x.barrier(ch)))
    x.do("close", lambda: ch.close())
    ch = c.channel()
    gets(x, "after_channel_close", ch, q, 5, auto_ack=False)
    c2 = x.connect()
    ch2 = c2.channel()
    x.do("close_connection_with_unacked", lambda: c.close())
    gets(x, "after_connection_close", ch2, q, 5, auto_ack=True)
    x.do("delete", lambda: ch2.queue_delete(q))


@scenario
def consume_no_ack_ignores_prefetch(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    for i in range(5):
        ch.basic_publish("", q, b"m%d" % i)
    x.barrier(ch)
    x.do("qos_1", lambda: ch.basic_qos(prefetch_count=1))
    since = x.mark(c)
    x.do("consume_no_ack", lambda: x.consume(c, ch, q, consumer_tag="na", auto_ack=True))
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 5, 1.0)
    x.note("delivered", [(e["delivery_tag"], e["redelivered"], e["body"])
                         for e in x.events(c, since, ch, ("Basic.Deliver",))])
    x.do("ack_no_ack_delivery", lambda: (ch.basic_ack(1), x.barrier(ch)))
    ch = c.channel()
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def single_active_consumer(x):
    c = x.connect()
    ch1 = c.channel()
    ch2 = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch1.queue_declare(q, arguments={"x-single-active-consumer": True}))
    s1, s2 = x.mark(c), x.mark(c)
    x.do("consume_1", lambda: x.consume(c, ch1, q, consumer_tag="first"))
    x.do("consume_2", lambda: x.consume(c, ch2, q, consumer_tag="second"))
    x.do("counts", lambda: ch1.queue_declare(q, passive=True))
    for i in range(3):
        ch1.basic_publish("", q, b"m%d" % i)
    x.barrier(ch1)
    x.pump(c, 0.3)
    x.note("first_got", [e["body"] for e in x.events(c, s1, ch1, ("Basic.Deliver",))])
    x.note("second_got", [e["body"] for e in x.events(c, s2, ch2, ("Basic.Deliver",))])
    s2 = x.mark(c)
    x.do("close_first", lambda: ch1.close())
    x.pump(c, 0.3)
    x.note("second_got_after_first_closed",
           [(e["body"], e["redelivered"]) for e in x.events(c, s2, ch2, ("Basic.Deliver",))])
    x.do("delete", lambda: ch2.queue_delete(q))


@scenario
def single_active_consumer_cancel(x):
    """The active consumer cancels while holding unacked deliveries: the next in subscription
    order takes over (a later, higher x-priority does not jump the line); the cancelled
    consumer's unacked stay with its channel until settled."""
    c = x.connect()
    ch1, ch2, ch3 = c.channel(), c.channel(), c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch1.queue_declare(q, arguments={"x-single-active-consumer": True}))
    s1, s2, s3 = x.mark(c), x.mark(c), x.mark(c)
    x.do("consume_1", lambda: x.consume(c, ch1, q, consumer_tag="first"))
    x.do("consume_2", lambda: x.consume(c, ch2, q, consumer_tag="second"))
    x.do("consume_3", lambda: x.consume(c, ch3, q, consumer_tag="third",
                                        arguments={"x-priority": 10}))
    for i in range(2):
        ch1.basic_publish("", q, b"a%d" % i)
    x.barrier(ch1)
    x.pump(c, 0.3)
    x.note("first_got", [e["body"] for e in x.events(c, s1, ch1, ("Basic.Deliver",))])
    s1, s2, s3 = x.mark(c), x.mark(c), x.mark(c)
    x.do("cancel_first", lambda: x.cancel(c, ch1, "first"))
    for i in range(2):
        ch1.basic_publish("", q, b"b%d" % i)
    x.barrier(ch1)
    x.pump(c, 0.3)
    x.note("second_got", [(e["body"], e["redelivered"])
                          for e in x.events(c, s2, ch2, ("Basic.Deliver",))])
    x.note("third_got", [e["body"] for e in x.events(c, s3, ch3, ("Basic.Deliver",))])
    x.do("counts", lambda: ch1.queue_declare(q, passive=True))
    s2 = x.mark(c)
    x.do("nack_first_channel", lambda: (ch1.basic_nack(0, multiple=True, requeue=True),
                                        x.barrier(ch1)))
    x.pump(c, 0.3)
    x.note("second_got_requeued", [(e["body"], e["redelivered"])
                                   for e in x.events(c, s2, ch2, ("Basic.Deliver",))])
    x.do("delete", lambda: ch1.queue_delete(q))


@scenario
def single_active_consumer_arguments(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare_longstr", lambda: ch.queue_declare(
        x.name("s"), arguments={"x-single-active-consumer": "true"}))
    ch = c.channel()
    x.do("declare_int", lambda: ch.queue_declare(
        x.name("i"), arguments={"x-single-active-consumer": 1}))
    ch = c.channel()
    x.do("declare_false", lambda: ch.queue_declare(
        q, arguments={"x-single-active-consumer": False}))
    x.do("redeclare_true", lambda: ch.queue_declare(
        q, arguments={"x-single-active-consumer": True}))
    ch = c.channel()
    x.do("redeclare_without", lambda: ch.queue_declare(q))
    ch = c.channel()
    s = x.mark(c)
    x.do("consume_1", lambda: x.consume(c, ch, q, consumer_tag="one", auto_ack=True))
    x.do("consume_2", lambda: x.consume(c, ch, q, consumer_tag="two", auto_ack=True))
    for i in range(4):
        ch.basic_publish("", q, b"m%d" % i)
    x.barrier(ch)
    x.pump(c, 0.3)
    x.note("false_is_round_robin", [(e["consumer_tag"], e["body"])
                                    for e in x.events(c, s, ch, ("Basic.Deliver",))])
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def single_active_consumer_exclusive(x):
    c = x.connect()
    ch1, ch2 = c.channel(), c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch1.queue_declare(q, arguments={"x-single-active-consumer": True}))
    x.do("exclusive_first", lambda: x.consume(c, ch1, q, consumer_tag="ex", exclusive=True))
    x.do("second", lambda: x.consume(c, ch2, q, consumer_tag="second"))
    x.do("cancel_exclusive", lambda: x.cancel(c, ch1, "ex"))
    x.do("plain", lambda: x.consume(c, ch1, q, consumer_tag="plain"))
    x.do("exclusive_later", lambda: x.consume(c, ch2, q, consumer_tag="late", exclusive=True))
    ch2 = c.channel()
    x.do("get_beside_active", lambda: (ch2.basic_publish("", q, b"g"), x.barrier(ch2)))
    x.pump(c, 0.2)
    x.get("get", ch2, q)
    x.do("delete", lambda: ch2.queue_delete(q))


@scenario
def single_active_consumer_get(x):
    """basic.get beside a single active consumer that has no credit left."""
    c = x.connect()
    ch1, ch2 = c.channel(), c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch1.queue_declare(q, arguments={"x-single-active-consumer": True}))
    x.do("qos_1", lambda: ch1.basic_qos(prefetch_count=1))
    s1 = x.mark(c)
    x.do("consume", lambda: x.consume(c, ch1, q, consumer_tag="active"))
    x.do("waiting", lambda: x.consume(c, ch2, q, consumer_tag="waiting"))
    for i in range(3):
        ch2.basic_publish("", q, b"m%d" % i)
    x.barrier(ch2)
    x.pump(c, 0.3)
    x.note("active_got", [e["body"] for e in x.events(c, s1, ch1, ("Basic.Deliver",))])
    ch3 = c.channel()
    x.get("get", ch3, q, auto_ack=True)
    x.do("counts", lambda: ch3.queue_declare(q, passive=True))
    x.do("delete", lambda: ch3.queue_delete(q))


@scenario
def consumer_priority(x):
    """Higher x-priority consumers get messages while they have credit; lower ones only what
    they cannot take; equal priorities share round-robin."""
    c = x.connect()
    ch_high, ch_mid, ch_none = c.channel(), c.channel(), c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch_high.queue_declare(q))
    x.do("qos", lambda: (ch_high.basic_qos(prefetch_count=2), ch_mid.basic_qos(prefetch_count=2),
                         ch_none.basic_qos(prefetch_count=10)))
    s = x.mark(c)
    x.do("consume_none", lambda: x.consume(c, ch_none, q, consumer_tag="none"))
    x.do("consume_mid_a", lambda: x.consume(c, ch_mid, q, consumer_tag="mid-a",
                                            arguments={"x-priority": 3}))
    x.do("consume_mid_b", lambda: x.consume(c, ch_mid, q, consumer_tag="mid-b",
                                            arguments={"x-priority": raw_int("b", 3)}))
    x.do("consume_high", lambda: x.consume(c, ch_high, q, consumer_tag="high",
                                           arguments={"x-priority": raw_int("l", 7)}))
    for i in range(8):
        ch_none.basic_publish("", q, b"m%d" % i)
    x.barrier(ch_none)
    x.pump(c, 0.3)
    x.note("got", by_consumer(x.events(c, s, None, ("Basic.Deliver",))))
    s = x.mark(c)
    x.do("ack_high", lambda: (ch_high.basic_ack(0, multiple=True), x.barrier(ch_high)))
    for i in range(8, 11):
        ch_none.basic_publish("", q, b"m%d" % i)
    x.barrier(ch_none)
    x.pump(c, 0.3)
    x.note("got_after_ack", by_consumer(x.events(c, s, None, ("Basic.Deliver",))))
    x.do("delete", lambda: ch_none.queue_delete(q))


@scenario
def consumer_priority_arguments(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    x.do("priority_longstr", lambda: x.consume(c, ch, q, consumer_tag="s",
                                               arguments={"x-priority": "high"}))
    ch = c.channel()
    x.do("priority_double", lambda: x.consume(c, ch, q, consumer_tag="d",
                                              arguments={"x-priority": Raw(
                                                  "d", struct.pack(">d", 1.5))}))
    ch = c.channel()
    x.do("priority_bool", lambda: x.consume(c, ch, q, consumer_tag="t",
                                            arguments={"x-priority": True}))
    ch = c.channel()
    x.do("priority_negative", lambda: x.consume(c, ch, q, consumer_tag="n",
                                                arguments={"x-priority": -5}))
    x.do("cancel_on_failover_longstr", lambda: x.consume(
        c, ch, q, consumer_tag="f", arguments={"x-cancel-on-ha-failover": "yes"}))
    ch = c.channel()
    x.do("cancel_on_failover_bool", lambda: x.consume(
        c, ch, q, consumer_tag="f", arguments={"x-cancel-on-ha-failover": True}))
    x.do("unknown_argument", lambda: x.consume(c, ch, q, consumer_tag="u",
                                               arguments={"x-whatever": "kept"}))
    x.do("delete", lambda: ch.queue_delete(q))


# ==============================================================================================
# basic.qos

@scenario
def qos_per_consumer(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    for i in range(6):
        ch.basic_publish("", q, b"m%d" % i)
    x.barrier(ch)
    x.do("qos_2", lambda: ch.basic_qos(prefetch_count=2))
    since = x.mark(c)
    x.consume(c, ch, q, consumer_tag="limited")
    x.pump(c, 0.3)
    x.note("delivered_with_prefetch_2", x.count(c, since, ch, "Basic.Deliver"))
    x.do("qos_4_after_consume", lambda: ch.basic_qos(prefetch_count=4))
    x.pump(c, 0.3)
    x.note("delivered_after_raising_per_consumer", x.count(c, since, ch, "Basic.Deliver"))
    x.do("ack_1", lambda: (ch.basic_ack(1), x.barrier(ch)))
    x.pump(c, 0.3)
    x.note("delivered_after_ack", x.count(c, since, ch, "Basic.Deliver"))
    x.note("tags", [e["delivery_tag"] for e in x.events(c, since, ch, ("Basic.Deliver",))])
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def qos_global(x):
    c = x.connect()
    ch = c.channel()
    q1, q2 = x.name("q1"), x.name("q2")
    x.do("declare", lambda: (ch.queue_declare(q1), ch.queue_declare(q2)))
    for i in range(4):
        ch.basic_publish("", q1, b"a%d" % i)
        ch.basic_publish("", q2, b"b%d" % i)
    x.barrier(ch)
    x.do("qos_global_3", lambda: ch.basic_qos(prefetch_count=3, global_qos=True))
    since = x.mark(c)
    x.consume(c, ch, q1, consumer_tag="g1")
    x.consume(c, ch, q2, consumer_tag="g2")
    x.pump(c, 0.3)
    x.note("delivered_global_3", x.count(c, since, ch, "Basic.Deliver"))
    x.do("qos_global_5", lambda: ch.basic_qos(prefetch_count=5, global_qos=True))
    x.pump(c, 0.3)
    x.note("delivered_after_raising_global", x.count(c, since, ch, "Basic.Deliver"))
    x.do("ack_all", lambda: (ch.basic_ack(0, multiple=True), x.barrier(ch)))
    x.pump(c, 0.3)
    x.note("delivered_after_ack_all", x.count(c, since, ch, "Basic.Deliver"))
    x.do("delete", lambda: (ch.queue_delete(q1), ch.queue_delete(q2)))


@scenario
def qos_both_limits(x):
    """A per-consumer and a global limit together: the smaller one wins."""
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    for i in range(6):
        ch.basic_publish("", q, b"m%d" % i)
    x.barrier(ch)
    x.do("qos_global_4", lambda: ch.basic_qos(prefetch_count=4, global_qos=True))
    x.do("qos_consumer_1", lambda: ch.basic_qos(prefetch_count=1))
    since = x.mark(c)
    x.consume(c, ch, q, consumer_tag="both")
    x.pump(c, 0.3)
    x.note("delivered", x.count(c, since, ch, "Basic.Deliver"))
    x.get("get_beside_consumer", ch, q)
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def qos_prefetch_size(x):
    c = x.connect()
    ch = c.channel()
    x.do("qos_prefetch_size", lambda: ch.basic_qos(prefetch_size=1000, prefetch_count=1))


# ==============================================================================================
# confirms and transactions

@scenario
def confirm_sequence(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q, durable=True))
    x.do("confirm_select", lambda: x.raw(c, ch, spec.Confirm.Select(),
                                         replies=("Confirm.SelectOk",)))
    x.do("confirm_select_again", lambda: x.raw(c, ch, spec.Confirm.Select(),
                                               replies=("Confirm.SelectOk",)))
    since = x.mark(c)
    for i in range(1, 6):
        ch._impl.basic_publish("", q if i != 3 else x.name("nowhere"), b"m%d" % i,
                               P(delivery_mode=2 if i % 2 else 1), mandatory=(i == 3))
    def confirmed():
        acked, nacked = set(), set()
        for e in x.entries(c, since, ch, ("Basic.Ack", "Basic.Nack")):
            m = e["method"]
            tags = range(1, m.delivery_tag + 1) if m.multiple else [m.delivery_tag]
            (acked if m.NAME == "Basic.Ack" else nacked).update(tags)
        return acked, nacked
    x.wait(c, lambda: len(set.union(*confirmed())) >= 5, 2.0)
    acked, nacked = confirmed()
    x.note("confirmed", {"acked": sorted(acked), "nacked": sorted(nacked)})
    x.note("return_before_its_ack", [
        e["method"].NAME for e in x.entries(c, since, ch, ("Basic.Return", "Basic.Ack"))
        if e["method"].NAME == "Basic.Return" or
        (e["method"].delivery_tag >= 3 if e["method"].multiple else e["method"].delivery_tag == 3)
    ][:2])
    x.do("counts", lambda: ch.queue_declare(q, passive=True))
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def confirm_tx_conflicts(x):
    c = x.connect()
    ch = c.channel()
    ch.confirm_delivery()
    x.do("tx_select_on_confirm_channel", lambda: ch.tx_select())
    ch = c.channel()
    x.do("tx_select", lambda: ch.tx_select())
    x.do("confirm_select_on_tx_channel", lambda: x.raw(c, ch, spec.Confirm.Select(),
                                                       replies=("Confirm.SelectOk",)))


@scenario
def tx_commit_rollback(x):
    c = x.connect()
    ch = c.channel()
    q = x.name("q")
    x.do("declare", lambda: ch.queue_declare(q))
    x.do("tx_select", lambda: ch.tx_select())
    x.do("tx_select_again", lambda: ch.tx_select())
    ch.basic_publish("", q, b"rolled-back-1")
    ch.basic_publish("", q, b"rolled-back-2")
    x.barrier(ch)
    x.do("counts_before_rollback", lambda: ch.queue_declare(q, passive=True))
    x.do("rollback", lambda: ch.tx_rollback())
    x.do("counts_after_rollback", lambda: ch.queue_declare(q, passive=True))
    ch.basic_publish("", q, b"committed-1")
    ch.basic_publish("", q, b"committed-2")
    x.do("commit", lambda: ch.tx_commit())
    x.barrier(ch)
    x.do("counts_after_commit", lambda: ch.queue_declare(q, passive=True))
    x.get("get_in_tx", ch, q)
    x.do("ack_in_tx", lambda: ch.basic_ack(1))
    x.do("rollback_ack", lambda: ch.tx_rollback())
    x.do("counts_after_ack_rollback", lambda: ch.queue_declare(q, passive=True))
    x.do("ack_again_then_commit", lambda: (ch.basic_ack(1), ch.tx_commit()))
    x.do("counts_after_ack_commit", lambda: ch.queue_declare(q, passive=True))
    x.get("get_second", ch, q)
    x.do("reject_in_tx_commit", lambda: (ch.basic_reject(2, requeue=True), ch.tx_commit()))
    x.get("get_second_again", ch, q, auto_ack=True)
    x.do("empty_commit", lambda: ch.tx_commit())
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def tx_errors(x):
    c = x.connect()
    ch = c.channel()
    x.do("commit_without_select", lambda: ch.tx_commit())
    ch = c.channel()
    x.do("rollback_without_select", lambda: ch.tx_rollback())
    ch = c.channel()
    q = x.name("q")
    x.do("tx_ack_unknown_tag", lambda: (ch.tx_select(), ch.basic_ack(3), ch.tx_commit()))
    ch = c.channel()
    x.do("tx_publish_missing_exchange", lambda: (ch.tx_select(),
                                                 ch.basic_publish(x.name("nox"), "k", b"m"),
                                                 ch.tx_commit()))
    ch = c.channel()
    x.do("declare", lambda: ch.queue_declare(q))
    x.do("tx_publish_mandatory_unroutable", lambda: (ch.tx_select(),
                                                     ch.basic_publish("amq.direct", "nowhere",
                                                                      b"m", mandatory=True),
                                                     ch.tx_commit()))
    x.do("delete", lambda: ch.queue_delete(q))


# ==============================================================================================
# dead-lettering, TTL

@scenario
def dlx_reject(x):
    c = x.connect()
    ch = c.channel()
    q, dlq, dlx = x.name("q"), x.name("dlq"), x.name("dlx")
    x.do("declare", lambda: (ch.exchange_declare(dlx, "direct"), ch.queue_declare(dlq),
                             ch.queue_bind(dlq, dlx, "orig-key"),
                             ch.queue_declare(q, arguments={"x-dead-letter-exchange": dlx}),
                             ch.queue_bind(q, "amq.direct", "orig-key")))
    x.do("publish", lambda: x.publish_sync(ch, "amq.direct", "orig-key", b"dead",
                                           P(headers={"app": "x"}, message_id="m1")))
    x.get("get", ch, q)
    x.do("reject_no_requeue", lambda: (ch.basic_reject(1, requeue=False), x.barrier(ch)))
    x.pump(c, 0.1)
    x.get("dead_lettered", ch, dlq)
    x.do("nack_dead_letter_without_dlx", lambda: (ch.basic_nack(2, requeue=False),
                                                  x.barrier(ch)))
    x.do("counts", lambda: ch.queue_declare(dlq, passive=True))
    x.do("delete", lambda: (ch.queue_delete(q), ch.exchange_delete(dlx)))


@scenario
def dlx_count_cycle(x):
    """q1 --reject--> q2 --ttl 50--> q1 --reject--> q2: x-death counts and order."""
    c = x.connect()
    ch = c.channel()
    q1, q2 = x.name("q1"), x.name("q2")
    x.do("declare", lambda: (
        ch.queue_declare(q1, arguments={"x-dead-letter-exchange": "",
                                        "x-dead-letter-routing-key": q2}),
        ch.queue_declare(q2, arguments={"x-dead-letter-exchange": "",
                                        "x-dead-letter-routing-key": q1,
                                        "x-message-ttl": 50})))
    x.do("publish", lambda: x.publish_sync(ch, "", q1, b"cycle"))
    for i in range(2):
        def reject_one():
            m, _p, _b = ch.basic_get(q1)
            ch.basic_reject(m.delivery_tag, requeue=False)
            x.barrier(ch)
        x.do("reject_%d" % (i + 1), reject_one)
        x.pump(c, 0.4)
    x.get("final_in_q1", ch, q1, auto_ack=True)
    x.do("delete", lambda: (ch.queue_delete(q1), ch.queue_delete(q2)))


@scenario
def dlx_ttl_expiry(x):
    c = x.connect()
    ch = c.channel()
    q, dlq = x.name("q"), x.name("dlq")
    x.do("declare", lambda: (ch.queue_declare(dlq), ch.queue_declare(q, arguments={
        "x-message-ttl": 100, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})))
    x.do("publish", lambda: x.publish_sync(ch, "", q, b"old", P(delivery_mode=2)))
    x.pump(c, 0.5)
    x.get("source_after_ttl", ch, q)
    x.get("dead_lettered", ch, dlq, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def dlx_per_message_expiration(x):
    c = x.connect()
    ch = c.channel()
    q, dlq = x.name("q"), x.name("dlq")
    x.do("declare", lambda: (ch.queue_declare(dlq), ch.queue_declare(q, arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})))
    x.do("publish", lambda: x.publish_sync(ch, "", q, b"expiring",
                                           P(expiration="100", headers={"h": 1})))
    x.pump(c, 0.5)
    x.get("source", ch, q)
    x.get("dead_lettered", ch, dlq, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def dlx_maxlen(x):
    c = x.connect()
    ch = c.channel()
    q, dlq = x.name("q"), x.name("dlq")
    x.do("declare", lambda: (ch.queue_declare(dlq), ch.queue_declare(q, arguments={
        "x-max-length": 1, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})))
    x.do("publish_two", lambda: (ch.basic_publish("", q, b"first"),
                                 x.publish_sync(ch, "", q, b"second")))
    x.pump(c, 0.1)
    x.get("dead_lettered", ch, dlq, auto_ack=True)
    x.get("kept", ch, q, auto_ack=True)
    x.do("delete", lambda: ch.queue_delete(q))


@scenario
def dlx_routing_and_missing_exchange(x):
    c = x.connect()
    ch = c.channel()
    q, qm, dlq, dlx = x.name("q"), x.name("qm"), x.name("dlq"), x.name("dlx")
    x.do("declare", lambda: (
        ch.exchange_declare(dlx, "topic"), ch.queue_declare(dlq),
        ch.queue_bind(dlq, dlx, "new.#"),
        ch.queue_declare(q, arguments={"x-dead-letter-exchange": dlx,
                                       "x-dead-letter-routing-key": "new.key"}),
        ch.queue_declare(qm, arguments={"x-dead-letter-exchange": x.name("missing")})))
    x.do("publish", lambda: (ch.basic_publish("", q, b"to-new-key"),
                             x.publish_sync(ch, "", qm, b"lost")))
    x.get("get_q", ch, q)
    x.do("reject_q", lambda: (ch.basic_reject(1, requeue=False), x.barrier(ch)))
    x.get("get_qm", ch, qm)
    x.do("reject_qm", lambda: (ch.basic_reject(2, requeue=False), x.barrier(ch)))
    x.pump(c, 0.1)
    x.get("dead_lettered", ch, dlq, auto_ack=True)
    x.do("counts_qm", lambda: ch.queue_declare(qm, passive=True))
    x.do("delete", lambda: (ch.queue_delete(q), ch.queue_delete(qm), ch.exchange_delete(dlx)))


@scenario
def per_message_expiration(x):
    c = x.connect()
    ch = c.channel()
    q, qt = x.name("q"), x.name("qt")
    x.do("declare", lambda: (ch.queue_declare(q), ch.queue_declare(qt, arguments={
        "x-message-ttl": 100})))
    x.do("publish", lambda: (ch.basic_publish("", q, b"zero", P(expiration="0")),
                             ch.basic_publish("", q, b"short", P(expiration="100")),
                             ch.basic_publish("", q, b"long", P(expiration="60000")),
                             ch.basic_publish("", qt, b"queue-ttl-wins", P(expiration="60000")),
                             ch.basic_publish("", qt, b"msg-ttl-wins", P(expiration="1")),
                             x.barrier(ch)))
    x.pump(c, 0.4)
    gets(x, "q_left", ch, q, 3)
    gets(x, "qt_left", ch, qt, 3)
    since = x.mark(c)
    x.consume(c, ch, q, auto_ack=True, consumer_tag="live")
    x.do("publish_zero_with_consumer", lambda: x.publish_sync(ch, "", q, b"zero-live",
                                                              P(expiration="0")))
    x.wait(c, lambda: x.count(c, since, ch, "Basic.Deliver") >= 1, 1.0)
    x.note("delivered", x.events(c, since, ch, ("Basic.Deliver",)))
    x.do("delete", lambda: (ch.queue_delete(q), ch.queue_delete(qt)))


# ==============================================================================================
# everything together: listing order of the module

ALL = list(SCENARIOS)
