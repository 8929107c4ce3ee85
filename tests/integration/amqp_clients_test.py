#!/usr/bin/python3
"""Real Python AMQP clients from Debian against the real wharfd: pika 1.2 (python3-pika) and
kombu 5.2 over py-amqp (python3-kombu), the libraries Celery and most Python services use.

Run by ctest: amqp_clients_test.py WHARFD_PATH. Starts wharfd on free loopback ports with a
temporary data directory, and stops it at the end.
"""
import shutil
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import time
import unittest

import kombu
import pika

from wharfd_process import Wharfd

WHARFD = None


class PikaTest(unittest.TestCase):
    def connect(self):
        return pika.BlockingConnection(
            pika.ConnectionParameters("127.0.0.1", BROKER.amqp_port,
                                      credentials=pika.PlainCredentials("guest", "guest")))

    def test_publish_get_consume_ack_and_headers_of_every_kind(self):
        conn = self.connect()
        ch = conn.channel()
        q = ch.queue_declare(queue="", exclusive=True).method.queue
        self.assertTrue(q.startswith("amq.gen-"), q)
        headers = {"int": 7, "neg": -70000, "long": 1 << 40, "text": "héllo", "flag": True,
                   "list": [1, "x", None], "nested": {"deep": {"n": 3}}, "none": None}
        props = pika.BasicProperties(content_type="application/json", delivery_mode=2,
                                     correlation_id="c-1", reply_to="r", message_id="m-1",
                                     timestamp=1700000000, type="t", app_id="a",
                                     priority=5, headers=headers)
        ch.basic_publish("", q, b"\x00\xffbody", props)
        method, got, body = ch.basic_get(q)
        self.assertEqual(body, b"\x00\xffbody")
        self.assertEqual(method.message_count, 0)
        for field in ("content_type", "delivery_mode", "correlation_id", "reply_to",
                      "message_id", "timestamp", "type", "app_id", "priority"):
            self.assertEqual(getattr(got, field), getattr(props, field), field)
        self.assertEqual(got.headers, headers)
        ch.basic_ack(method.delivery_tag)
        for i in range(3):
            ch.basic_publish("", q, b"m%d" % i)
        seen = []
        for method, _, body in ch.consume(q, inactivity_timeout=2):
            if method is None:
                break
            seen.append(body)
            ch.basic_ack(method.delivery_tag)
            if len(seen) == 3:
                break
        ch.cancel()
        self.assertEqual(seen, [b"m0", b"m1", b"m2"])
        conn.close()

    def test_confirms_returns_and_nack_of_a_full_reject_publish_queue(self):
        conn = self.connect()
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("bounded", arguments={"x-max-length": 1, "x-overflow": "reject-publish"},
                         auto_delete=True)
        ch.basic_publish("", "bounded", b"first")  # acked, or this raises
        with self.assertRaises(pika.exceptions.NackError):
            ch.basic_publish("", "bounded", b"second")
        with self.assertRaises(pika.exceptions.UnroutableError):
            ch.basic_publish("", "no-such-queue", b"x", mandatory=True)
        conn.close()

    def test_rejected_and_expired_messages_are_dead_lettered_with_x_death(self):
        conn = self.connect()
        ch = conn.channel()
        ch.exchange_declare("dlx", "fanout")
        ch.queue_declare("dead", auto_delete=False)
        ch.queue_bind("dead", "dlx")
        ch.queue_declare("live", arguments={"x-dead-letter-exchange": "dlx"})
        ch.queue_declare("ttl", arguments={"x-dead-letter-exchange": "dlx", "x-message-ttl": 50})
        ch.basic_publish("", "live", b"rejected")
        method, _, _ = ch.basic_get("live")
        ch.basic_reject(method.delivery_tag, requeue=False)
        ch.basic_publish("", "ttl", b"expired")
        deaths = {}
        deadline = time.time() + 10
        while len(deaths) < 2 and time.time() < deadline:
            method, props, body = ch.basic_get("dead", auto_ack=True)
            if method is None:
                time.sleep(0.05)
                continue
            deaths[body] = props.headers["x-death"][0]
        self.assertEqual(deaths[b"rejected"]["reason"], "rejected")
        self.assertEqual(deaths[b"rejected"]["queue"], "live")
        self.assertEqual(deaths[b"rejected"]["count"], 1)
        self.assertEqual(deaths[b"expired"]["reason"], "expired")
        self.assertEqual(deaths[b"expired"]["queue"], "ttl")
        for name in ("live", "ttl", "dead"):
            ch.queue_delete(name)
        ch.exchange_delete("dlx")
        conn.close()

    def test_an_internal_exchange_is_fed_only_through_exchange_bindings(self):
        conn = self.connect()
        ch = conn.channel()
        ch.exchange_declare("inner", "fanout", internal=True)
        ch.exchange_declare("outer", "fanout")
        ch.exchange_bind("inner", "outer")
        ch.queue_declare("fed")
        ch.queue_bind("fed", "inner")
        ch.basic_publish("outer", "", b"via outer")
        self.assertEqual(ch.basic_get("fed", auto_ack=True)[2], b"via outer")
        ch.basic_publish("inner", "", b"direct")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.basic_get("fed", auto_ack=True)
        self.assertEqual(closed.exception.reply_code, 403)
        ch = conn.channel()
        ch.queue_delete("fed")
        ch.exchange_delete("outer")
        ch.exchange_delete("inner")
        conn.close()

    def test_a_quorum_queue_counts_returns_in_x_delivery_count_up_to_its_limit(self):
        conn = self.connect()
        ch = conn.channel()
        ch.queue_declare("quorum-q", durable=True,
                         arguments={"x-queue-type": "quorum", "x-delivery-limit": 2})
        ch.queue_declare("classic-q", auto_delete=True)
        ch.basic_publish("", "quorum-q", b"job", pika.BasicProperties(headers={"mine": 1}))
        ch.basic_publish("", "classic-q", b"job")
        counts = []
        for _ in range(3):
            method, props, body = ch.basic_get("quorum-q")
            self.assertEqual(body, b"job")
            self.assertEqual(props.headers["mine"], 1)
            counts.append(props.headers.get("x-delivery-count"))
            ch.basic_nack(method.delivery_tag, requeue=True)
        # RabbitMQ 3.10: the returns so far, 0 on the first delivery; past the limit (2
        # returns) the message is dead-lettered (here: dropped, no dead-letter target).
        self.assertEqual(counts, [0, 1, 2])
        self.assertEqual(ch.basic_get("quorum-q"), (None, None, None))
        # A classic queue has no such header.
        method, _, _ = ch.basic_get("classic-q")
        ch.basic_nack(method.delivery_tag, requeue=True)
        method, props, _ = ch.basic_get("classic-q", auto_ack=True)
        self.assertTrue(method.redelivered)
        self.assertNotIn("x-delivery-count", props.headers or {})
        ch.queue_delete("quorum-q")
        conn.close()

    def test_a_delayed_message_exchange_delivers_after_x_delay(self):
        conn = self.connect()
        ch = conn.channel()
        ch.exchange_declare("later", "x-delayed-message",
                            arguments={"x-delayed-type": "direct"})
        ch.queue_declare("delayed-target", auto_delete=True)
        ch.queue_bind("delayed-target", "later", "k")
        published = time.monotonic()
        ch.basic_publish("later", "k", b"in 400 ms", pika.BasicProperties(headers={"x-delay": 400}))
        ch.basic_publish("later", "k", b"now")
        self.assertEqual(ch.basic_get("delayed-target", auto_ack=True)[2], b"now")
        self.assertEqual(ch.basic_get("delayed-target", auto_ack=True), (None, None, None))
        body = None
        while body is None and time.monotonic() < published + 10:
            body = ch.basic_get("delayed-target", auto_ack=True)[2]
            if body is None:
                time.sleep(0.02)
        self.assertEqual(body, b"in 400 ms")
        self.assertGreaterEqual(time.monotonic() - published, 0.4)
        # Redeclared with its plugin type and arguments: the same exchange.
        ch.exchange_declare("later", "x-delayed-message", arguments={"x-delayed-type": "direct"})
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.exchange_declare("bad", "x-delayed-message")
        self.assertEqual(closed.exception.reply_code, 406)
        self.assertEqual(closed.exception.reply_text, "PRECONDITION_FAILED - Invalid argument, "
                         "'x-delayed-type' must be an existing exchange type")
        ch = conn.channel()
        ch.exchange_delete("later")
        conn.close()

    def test_direct_reply_to_rpc(self):
        client_conn = self.connect()
        server_conn = self.connect()
        client = client_conn.channel()
        server = server_conn.channel()
        server.queue_declare("rpc-requests", auto_delete=True)
        replies = []
        client.basic_consume("amq.rabbitmq.reply-to",
                             lambda ch, method, props, body: replies.append((method, props, body)),
                             auto_ack=True)
        client.basic_publish("", "rpc-requests", b"ping",
                             pika.BasicProperties(reply_to="amq.rabbitmq.reply-to",
                                                  correlation_id="c-7"))
        # Published on another connection: nothing orders it before this get, so wait for it.
        deadline = time.time() + 10
        method, props, body = server.basic_get("rpc-requests", auto_ack=True)
        while method is None and time.time() < deadline:
            time.sleep(0.02)
            method, props, body = server.basic_get("rpc-requests", auto_ack=True)
        self.assertEqual(body, b"ping")
        address = props.reply_to
        self.assertTrue(address.startswith("amq.rabbitmq.reply-to."), address)
        declared = server.queue_declare(address, passive=True).method
        self.assertEqual((declared.message_count, declared.consumer_count), (0, 1))
        server.basic_publish("", address, b"pong", pika.BasicProperties(correlation_id="c-7"))
        deadline = time.time() + 10
        while not replies and time.time() < deadline:
            client_conn.process_data_events(time_limit=0.05)
        self.assertEqual(len(replies), 1)
        method, props, body = replies[0]
        self.assertEqual((body, props.correlation_id), (b"pong", "c-7"))
        self.assertEqual((method.exchange, method.routing_key), ("", address))
        # RabbitMQ's refusals.
        ch = client_conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.basic_consume("amq.rabbitmq.reply-to", lambda *a: None, auto_ack=False)
        self.assertEqual((closed.exception.reply_code, closed.exception.reply_text),
                         (406, "PRECONDITION_FAILED - reply consumer cannot acknowledge"))
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            server.basic_publish("", "rpc-requests", b"x",
                                 pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
            server.basic_get("rpc-requests")
        self.assertEqual((closed.exception.reply_code, closed.exception.reply_text),
                         (406, "PRECONDITION_FAILED - fast reply consumer does not exist"))
        # Once the client's channel is gone, so is its address.
        client.close()
        server = server_conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            server.queue_declare(address, passive=True)
        self.assertEqual(closed.exception.reply_code, 404)
        client_conn.close()
        server_conn.close()

    def test_consumer_priorities_and_a_single_active_consumer(self):
        conn = self.connect()
        low, high = conn.channel(), conn.channel()
        low.queue_declare("prio-q", auto_delete=True)
        got = {"low": [], "high": []}

        def on(name):
            return lambda ch, method, props, body: got[name].append(body)

        high.basic_qos(prefetch_count=1)
        low.basic_consume("prio-q", on("low"), consumer_tag="low")
        high.basic_consume("prio-q", on("high"), consumer_tag="high",
                           arguments={"x-priority": 10})
        for i in range(3):
            low.basic_publish("", "prio-q", b"m%d" % i)
        deadline = time.time() + 10
        while len(got["low"]) + len(got["high"]) < 3 and time.time() < deadline:
            conn.process_data_events(time_limit=0.05)
        self.assertEqual(got, {"high": [b"m0"], "low": [b"m1", b"m2"]})
        # A single active consumer: the first gets everything; when its channel closes, the
        # next gets its unacked messages again, redelivered.
        first, second = conn.channel(), conn.channel()
        first.queue_declare("sac-q", auto_delete=False,
                            arguments={"x-single-active-consumer": True})
        deliveries = {"first": [], "second": []}
        first.basic_consume("sac-q", lambda ch, m, p, b: deliveries["first"].append(b))
        second.basic_consume("sac-q", lambda ch, m, p, b: deliveries["second"].append(
            (b, m.redelivered)))
        for i in range(2):
            first.basic_publish("", "sac-q", b"s%d" % i)
        deadline = time.time() + 10
        while len(deliveries["first"]) < 2 and time.time() < deadline:
            conn.process_data_events(time_limit=0.05)
        conn.process_data_events(time_limit=0.2)
        self.assertEqual(deliveries, {"first": [b"s0", b"s1"], "second": []})
        first.close()
        deadline = time.time() + 10
        while len(deliveries["second"]) < 2 and time.time() < deadline:
            conn.process_data_events(time_limit=0.05)
        self.assertEqual(deliveries["second"], [(b"s0", True), (b"s1", True)])
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            conn.channel().basic_consume("sac-q", lambda *a: None, exclusive=True)
        self.assertEqual((closed.exception.reply_code, closed.exception.reply_text),
                         (403, "ACCESS_REFUSED - queue 'sac-q' in vhost '/' in exclusive use"))
        second.queue_delete("sac-q")
        conn.close()

    def test_a_priority_queue_delivers_higher_priorities_first(self):
        conn = self.connect()
        ch = conn.channel()
        ch.queue_declare("pq", durable=True, arguments={"x-max-priority": 5})
        ch.confirm_delivery()
        for body, priority in ((b"low", 1), (b"none", None), (b"top", 5), (b"mid", 3),
                               (b"above-max", 200), (b"mid-2", 3)):
            ch.basic_publish("", "pq", body, pika.BasicProperties(priority=priority,
                                                                  delivery_mode=2))
        method, props, body = ch.basic_get("pq")
        self.assertEqual((body, props.priority), (b"top", 5))
        ch.basic_nack(method.delivery_tag, requeue=True)  # back to the head of its lane
        got = []
        ch.basic_qos(prefetch_count=10)
        ch.basic_consume("pq", lambda c, m, p, b: (got.append((b, m.redelivered)),
                                                   c.basic_ack(m.delivery_tag)))
        deadline = time.time() + 10
        while len(got) < 6 and time.time() < deadline:
            conn.process_data_events(time_limit=0.05)
        self.assertEqual(got, [(b"top", True), (b"above-max", False), (b"mid", False),
                               (b"mid-2", False), (b"low", False), (b"none", False)])
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            conn.channel().queue_declare("pq", durable=True, arguments={"x-max-priority": 6})
        self.assertEqual(closed.exception.reply_code, 406)
        conn.channel().queue_delete("pq")
        conn.close()

    def test_message_groups_go_one_at_a_time_in_order(self):
        conn = self.connect()
        ch = conn.channel()
        ch.queue_declare("groups-q", durable=True, arguments={"x-message-groups": True})
        ch.confirm_delivery()
        for group, body in (("a", b"a1"), ("a", b"a2"), ("b", b"b1"), ("a", b"a3")):
            ch.basic_publish("", "groups-q", body,
                             pika.BasicProperties(headers={"x-group-id": group}, delivery_mode=2))
        first, _, body = ch.basic_get("groups-q")
        self.assertEqual(body, b"a1")
        second, _, body = ch.basic_get("groups-q")
        self.assertEqual(body, b"b1", "a2 waits while a1 is unacked")
        self.assertEqual(ch.basic_get("groups-q")[0], None)
        ch.basic_nack(first.delivery_tag, requeue=True)
        again, _, body = ch.basic_get("groups-q")
        self.assertEqual((body, again.redelivered), (b"a1", True))
        ch.basic_ack(again.delivery_tag)
        ch.basic_ack(second.delivery_tag)
        self.assertEqual(ch.basic_get("groups-q", auto_ack=True)[2], b"a2")
        self.assertEqual(ch.basic_get("groups-q", auto_ack=True)[2], b"a3")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.basic_publish("", "groups-q", b"bad",
                             pika.BasicProperties(headers={"x-group-id": ""}))
            ch.basic_get("groups-q")
        self.assertEqual(closed.exception.reply_code, 406)
        conn.channel().queue_delete("groups-q")
        conn.close()

    def test_wharfs_own_lease_applies_over_amqp_when_the_queue_asks_for_one(self):
        conn = self.connect()
        ch = conn.channel()
        ch.queue_declare("leased", auto_delete=True, arguments={"x-lease-ms": 300})
        ch.basic_publish("", "leased", b"task")
        first, _, _ = ch.basic_get("leased")
        self.assertFalse(first.redelivered)
        time.sleep(0.6)  # the lease ran out: the message is back, redelivered
        again, _, body = ch.basic_get("leased")
        self.assertIsNotNone(again)
        self.assertEqual(body, b"task")
        self.assertTrue(again.redelivered)
        ch.basic_ack(again.delivery_tag)
        # The late ack of the first delivery: a tag the channel no longer has.
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.basic_ack(first.delivery_tag)
            ch.basic_get("leased")
        self.assertEqual(closed.exception.reply_code, 406)
        self.assertEqual(closed.exception.reply_text,
                         "PRECONDITION_FAILED - unknown delivery tag %d" % first.delivery_tag)
        conn.close()

    def test_errors_close_the_channel_with_rabbitmqs_codes(self):
        conn = self.connect()
        ch = conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.queue_declare("absent", passive=True)
        self.assertEqual(closed.exception.reply_code, 404)
        self.assertEqual(closed.exception.reply_text, "NOT_FOUND - no queue 'absent' in vhost '/'")
        ch = conn.channel()
        ch.queue_declare("durable-q", durable=True)
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.queue_declare("durable-q", durable=False)
        self.assertEqual(closed.exception.reply_code, 406)
        ch = conn.channel()
        ch.queue_delete("durable-q")
        ch.queue_delete("never-existed")  # RabbitMQ: delete-ok
        ch.exchange_delete("never-existed")
        self.assertTrue(conn.is_open)
        conn.close()


class PikaFlowControlTest(unittest.TestCase):
    """connection.blocked / unblocked as a memory watermark moves (its own wharfd: a config
    file reloaded on SIGHUP)."""

    def test_blocked_and_unblocked_as_the_memory_watermark_moves(self):
        broker = Wharfd(WHARFD, "[flow]\nmemory_high_bytes = 0\ndisk_free_low_bytes = 0\n")
        try:
            conn = pika.BlockingConnection(pika.URLParameters(broker.url()))
            notices = []
            conn.add_on_connection_blocked_callback(
                lambda c, frame: notices.append(("blocked", frame.method.reason)))
            conn.add_on_connection_unblocked_callback(
                lambda c, frame: notices.append(("unblocked", None)))
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("flow-q", auto_delete=True)
            ch.basic_publish("", "flow-q", b"before")  # confirmed: this connection publishes
            # wharfd uses far more than 1 MiB: past the mark.
            broker.write_config("[flow]\nmemory_high_bytes = 1048576\ndisk_free_low_bytes = 0\n")
            broker.reload()
            deadline = time.time() + 10
            while not notices and time.time() < deadline:
                conn.process_data_events(time_limit=0.05)
            self.assertEqual(len(notices), 1, broker.read_log()[-3000:])
            self.assertEqual(notices[0][0], "blocked")
            self.assertIn("memory", notices[0][1])
            # A publish now is held, unread, not lost.
            unconfirmed = conn.channel()
            unconfirmed.basic_publish("", "flow-q", b"held")
            conn.process_data_events(time_limit=0.3)
            self.assertEqual(len(notices), 1)
            broker.write_config("[flow]\nmemory_high_bytes = 0\ndisk_free_low_bytes = 0\n")
            broker.reload()
            deadline = time.time() + 10
            while len(notices) < 2 and time.time() < deadline:
                conn.process_data_events(time_limit=0.05)
            self.assertEqual(notices[1:], [("unblocked", None)])
            bodies = []
            deadline = time.time() + 10
            while len(bodies) < 2 and time.time() < deadline:
                method, _, body = ch.basic_get("flow-q", auto_ack=True)
                if method is None:
                    time.sleep(0.02)
                else:
                    bodies.append(body)
            self.assertEqual(bodies, [b"before", b"held"])
            conn.close()
        finally:
            self.assertEqual(broker.stop(), 0)


class KombuTest(unittest.TestCase):
    def test_celery_style_topology(self):
        url = "amqp://guest:guest@127.0.0.1:%d//" % BROKER.amqp_port
        with kombu.Connection(url) as conn:
            channel = conn.channel()
            # Celery's pidbox: a fanout exchange, an auto-delete queue with x-expires and a TTL.
            pidbox = kombu.Exchange("celery.pidbox", "fanout", durable=False)
            reply = kombu.Queue("worker1.celery.pidbox", pidbox, auto_delete=True, durable=False,
                                queue_arguments={"x-expires": 10000, "x-message-ttl": 300000})
            tasks_ex = kombu.Exchange("celery", "direct", durable=True)
            tasks = kombu.Queue("celery", tasks_ex, routing_key="celery", durable=True)
            for q in (reply, tasks):
                q(channel).declare()
            channel.basic_qos(0, 4, True)  # Celery: global QoS with a RabbitMQ 3.x broker
            producer = kombu.Producer(channel)
            producer.publish({"task": "add", "args": [2, 2]}, exchange=tasks_ex,
                             routing_key="celery", serializer="json",
                             headers={"timelimit": [None, None], "retries": 0})
            producer.publish({"method": "ping"}, exchange=pidbox, serializer="json")
            received = []

            def on_message(body, message):
                received.append((body, message.headers))
                message.ack()

            with kombu.Consumer(channel, [tasks, reply], callbacks=[on_message]):
                channel.basic_qos(0, 8, True)  # raised at runtime, as Celery does for ETA tasks
                deadline = time.time() + 10
                while len(received) < 2 and time.time() < deadline:
                    try:
                        conn.drain_events(timeout=1)
                    except TimeoutError:
                        pass
            bodies = sorted(str(b) for b, _ in received)
            self.assertEqual(len(received), 2, received)
            self.assertIn(str({"task": "add", "args": [2, 2]}), bodies)
            task_headers = [h for b, h in received if "task" in b][0]
            self.assertEqual(task_headers["timelimit"], [None, None])


if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    BROKER = Wharfd(WHARFD)
    try:
        result = unittest.main(exit=False, verbosity=2).result
    finally:
        code = BROKER.stop()
    if not result.wasSuccessful():
        print(BROKER.read_log()[-20000:])
        sys.exit(1)
    if code != 0:
        print("wharfd exited with", code)
        print(BROKER.read_log()[-20000:])
        sys.exit(1)
    shutil.rmtree(BROKER.dir, ignore_errors=True)
