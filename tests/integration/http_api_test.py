#!/usr/bin/python3
"""The HTTP API (issue 19; docs/http-api.md) of the real wharfd, read the way scripts and
autoscalers written for RabbitMQ's management API read it (urllib and json, nothing of Wharf's):
queue depth at /api/queues/%2F/NAME, RabbitMQ's paging envelope, filters and sorting, bindings,
connections and consumers made by a real AMQP client (Debian's pika), who may see what, and
RabbitMQ's error bodies.

Run by ctest: http_api_test.py WHARFD_PATH WHARFCTL_PATH.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import unittest

import pika
import yaml

from api_request import api_request
from wharfd_process import Wharfd, across_kill_9

WHARFD = None
WHARFCTL = None
OPENAPI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                       "http-api.openapi.yaml")

# Every user's password is change-me (config/wharfd.toml's example hash).
HASH = ("pbkdf2-sha256$20000$e3fa77b999ab7bd3855a8760414e6e90$"
        "7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9")
ALL_ON_ROOT = '[{vhost = "/", configure = ".*", write = ".*", read = ".*"}]'
CONFIG = "".join(
    '[[auth.users]]\nname = "%s"\npassword_hash = "%s"\ntags = %s\npermissions = %s\n' % user
    for user in [
        ("mgmt", HASH, '["management"]', ALL_ON_ROOT),
        ("mon", HASH, '["monitoring"]', ALL_ON_ROOT),
        ("plain", HASH, "[]", ALL_ON_ROOT),
        ("reader", HASH, '["management"]',
         '[{vhost = "/", configure = "", write = "", read = ".*"}]'),
        ("shopper", HASH, '["management"]',
         '[{vhost = "shop", configure = ".*", write = ".*", read = ".*"}]'),
        ("pm", HASH, '["policymaker"]', ALL_ON_ROOT),
    ])


class HttpApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = Wharfd(WHARFD, CONFIG, extra_args=["--metrics-listen", "127.0.0.1:0"])
        cls.base = "http://127.0.0.1:%d" % cls.broker.ports["metrics"]
        cls.amqp = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", cls.broker.amqp_port, credentials=pika.PlainCredentials("guest", "guest"),
            connection_attempts=1))
        cls.channel = cls.amqp.channel()

    @classmethod
    def tearDownClass(cls):
        cls.amqp.close()
        code = cls.broker.stop()
        if code != 0:
            print(cls.broker.read_log()[-20000:])
        shutil.rmtree(cls.broker.dir, ignore_errors=True)
        assert code == 0, code

    def call(self, path, user="guest", password=None, method="GET"):
        """(status, headers, parsed JSON body) of a request as `user`; user None: no
        credentials."""
        secret = password if password is not None else (
            "guest" if user == "guest" else "change-me")
        status, headers, body = api_request(self.base + path, method, user, secret)
        self.assertEqual(headers.get("Content-Type"), "application/json", (path, body))
        return status, headers, json.loads(body.decode("utf-8"))

    def send(self, method, path, body, user="guest"):
        """(status, parsed JSON body or None) of a request with a JSON body."""
        status, _, data = api_request(self.base + path, method, user,
                                      "guest" if user == "guest" else "change-me", body)
        return status, json.loads(data) if data else None

    def get(self, path, user="guest"):
        status, _, body = self.call(path, user)
        self.assertEqual(status, 200, (path, body))
        return body

    def declare(self, name, **arguments):
        self.channel.queue_declare(name, durable=True, arguments=arguments or None)

    def publish(self, queue, body, exchange="", routing_key=None):
        self.channel.basic_publish(exchange, routing_key or queue, body,
                                   pika.BasicProperties(delivery_mode=2))

    def test_queue_depth_reads_as_from_rabbitmq(self):
        self.declare("orders", **{"x-max-length": 100, "x-message-ttl": 60000})
        self.channel.queue_purge("orders")
        for i in range(3):
            self.publish("orders", b"order %d" % i)
        method, _, _ = self.channel.basic_get("orders", auto_ack=False)  # one unacknowledged
        self.assertIsNotNone(method)
        q = self.get("/api/queues/%2F/orders")
        self.assertEqual(q["name"], "orders")
        self.assertEqual(q["vhost"], "/")
        self.assertEqual((q["messages"], q["messages_ready"], q["messages_unacknowledged"]),
                         (3, 2, 1))
        self.assertEqual(q["consumers"], 0)
        self.assertTrue(q["durable"])
        self.assertFalse(q["exclusive"])
        self.assertEqual(q["arguments"], {"x-max-length": 100, "x-message-ttl": 60000})
        self.assertEqual(q["type"], "classic")
        self.assertEqual(q["state"], "running")
        self.assertGreaterEqual(q["message_stats"]["publish"], 3)
        self.assertIn("rate", q["message_stats"]["publish_details"])
        self.channel.basic_nack(method.delivery_tag, requeue=True)
        # The same queue in the vhost's list and in the list of all.
        names = [x["name"] for x in self.get("/api/queues/%2F")]
        self.assertIn("orders", names)
        self.assertIn("orders", [x["name"] for x in self.get("/api/queues")])

    def test_pages_filters_sorting_and_columns(self):
        for i in range(1, 6):
            self.declare("pg-%d" % i)
            self.channel.queue_purge("pg-%d" % i)
            for _ in range(i):
                self.publish("pg-%d" % i, b"x")
        page = self.get("/api/queues/%2F?page=2&page_size=2&name=pg-")
        self.assertEqual({k: v for k, v in page.items() if k != "items"},
                         {"filtered_count": 5, "item_count": 2, "page": 2, "page_count": 3,
                          "page_size": 2, "total_count": page["total_count"]})
        self.assertGreaterEqual(page["total_count"], 5)
        self.assertEqual([q["name"] for q in page["items"]], ["pg-3", "pg-4"])
        # Sorted by depth, deepest first; only the columns asked for.
        top = self.get("/api/queues?name=PG-&sort=messages&sort_reverse=true&columns=name,messages")
        self.assertEqual(top[0], {"name": "pg-5", "messages": 5})
        self.assertEqual([q["messages"] for q in top], [5, 4, 3, 2, 1])
        nested = self.get("/api/queues?name=pg-1&columns=name,message_stats.publish")
        self.assertEqual(nested, [{"name": "pg-1", "message_stats": {"publish": 1}}])
        regex = self.get("/api/queues?name=%5Epg-%5B24%5D%24&use_regex=true&columns=name")
        self.assertEqual(regex, [{"name": "pg-2"}, {"name": "pg-4"}])
        # Bad queries get 400 and a reason, never a list.
        # Bad queries get 400 with RabbitMQ's error names and a reason, never a list.
        for query, error, words in [
                ("page=0", "invalid_pagination_parameters", "page must be a positive integer"),
                ("page=x", "bad_request", "page must be a positive integer"),
                ("page=1&page_size=501", "invalid_pagination_parameters",
                 "page_size must be at most 500"),
                ("page=99&page_size=2&name=pg-", "page_out_of_range", "past the last one"),
                ("name=(&use_regex=true", "bad_request", "not a valid regular expression"),
                ("sort_reverse=maybe", "bad_request", "sort_reverse must be true or false")]:
            status, _, body = self.call("/api/queues?" + query)
            self.assertEqual(status, 400, query)
            self.assertEqual(body["error"], error, query)
            self.assertIn(words, body["reason"], query)
        # A trailing slash is the same path.
        self.assertEqual(self.get("/api/queues/?name=pg-&columns=name"),
                         self.get("/api/queues?name=pg-&columns=name"))

    def test_bindings_exchanges_connections_and_consumers(self):
        self.declare("bound")
        self.channel.exchange_declare("ex1", "direct", durable=True)
        self.channel.queue_bind("bound", "ex1", "rk")
        source = self.get("/api/exchanges/%2F/ex1/bindings/source")
        self.assertEqual(source, [{"source": "ex1", "vhost": "/", "destination": "bound",
                                   "destination_type": "queue", "routing_key": "rk",
                                   "arguments": {}, "properties_key": "rk"}])
        of_queue = self.get("/api/queues/%2F/bound/bindings")
        self.assertEqual([(b["source"], b["routing_key"]) for b in of_queue],
                         [("", "bound"), ("ex1", "rk")])
        self.assertIn(("ex1", "bound"),
                      [(b["source"], b["destination"]) for b in self.get("/api/bindings/%2F")])
        ex = self.get("/api/exchanges/%2F/ex1")
        self.assertEqual((ex["name"], ex["type"], ex["durable"], ex["vhost"]),
                         ("ex1", "direct", True, "/"))
        self.assertIn("amq.topic", [e["name"] for e in self.get("/api/exchanges/%2F")])
        self.assertEqual(self.get("/api/exchanges/%2F/amq.default")["name"], "")

        tag = self.channel.basic_consume("bound", lambda *args: None)
        try:
            consumers = [c for c in self.get("/api/consumers/%2F") if c["consumer_tag"] == tag]
            self.assertEqual(len(consumers), 1)
            self.assertEqual(consumers[0]["queue"], {"name": "bound", "vhost": "/"})
            self.assertEqual(self.get("/api/queues/%2F/bound")["consumers"], 1)
        finally:
            self.channel.basic_cancel(tag)
        connections = self.get("/api/connections")
        mine = [c for c in connections if c["user"] == "guest" and c["protocol"] == "AMQP 0-9-1"]
        self.assertEqual(len(mine), 1, connections)
        self.assertEqual(mine[0]["vhost"], "/")
        self.assertEqual(mine[0]["peer_host"], "127.0.0.1")
        self.assertEqual(mine[0]["client_properties"]["product"], "Pika Python Client Library")
        self.assertEqual(self.get("/api/vhosts/%2F/connections"), connections)
        # A management user sees its own connections only; monitoring sees every one.
        self.assertEqual(self.get("/api/connections", user="mgmt"), [])
        self.assertEqual(self.get("/api/connections", user="mon"), connections)

    def test_who_may_see_what(self):
        status, headers, body = self.call("/api/queues", user=None)
        self.assertEqual(status, 401)
        self.assertEqual(headers.get("WWW-Authenticate"), 'Basic realm="wharf"')
        self.assertEqual(body["error"], "not_authorized")  # RabbitMQ's spelling for a login
        status, headers, body = self.call("/api/overview", user="mgmt", password="wrong")
        self.assertEqual(status, 401)
        self.assertEqual(body["error"], "not_authorized")
        self.assertIn("wrong user name or password", body["reason"])
        self.assertEqual(headers.get("WWW-Authenticate"), 'Basic realm="wharf"')
        status, _, body = self.call("/api/queues", user="plain")
        self.assertEqual((status, body), (401, {"error": "not_authorised",
                                                "reason": "Not management user"}))
        status, _, body = self.call("/api/users", user="mgmt")
        self.assertEqual((status, body), (401, {"error": "not_authorised",
                                                "reason": "Not administrator user"}))
        self.assertEqual(self.get("/api/whoami", user="mgmt"),
                         {"name": "mgmt", "tags": ["management"]})
        names = {u["name"]: u["tags"] for u in self.get("/api/users")}
        self.assertEqual(names["mon"], ["monitoring"])
        self.assertIn({"user": "shopper", "vhost": "shop", "configure": ".*", "write": ".*",
                       "read": ".*"}, self.get("/api/permissions"))

        # A vhost of its own: the shopper sees it and nothing of "/"; monitoring and
        # administrator see every vhost; a management user only those it has permissions in.
        self.wharfctl("add-vhost", "shop")
        try:
            shop = pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", self.broker.amqp_port, virtual_host="shop",
                credentials=pika.PlainCredentials("shopper", "change-me"),
                connection_attempts=1))
            shop.channel().queue_declare("shop-q")
            for path in ["/api/queues", "/api/queues/shop"]:
                self.assertEqual([(q["vhost"], q["name"]) for q in self.get(path, "shopper")],
                                 [("shop", "shop-q")], path)
            self.assertEqual([v["name"] for v in self.get("/api/vhosts", "shopper")], ["shop"])
            for user, path in [("shopper", "/api/queues/%2F"), ("mgmt", "/api/queues/shop"),
                               ("mon", "/api/queues/shop"), ("mgmt", "/api/queues/shop/shop-q")]:
                status, headers, body = self.call(path, user=user)
                self.assertEqual((status, body), (401, {
                    "error": "not_authorised",
                    "reason": "User not authorised to access virtual host"}), (user, path))
                self.assertIsNone(headers.get("WWW-Authenticate"))
            # As RabbitMQ: monitoring lists every vhost, but sees the queues of those it has
            # permissions in; a management user lists its own vhosts.
            self.assertEqual([v["name"] for v in self.get("/api/vhosts", "mon")], ["/", "shop"])
            self.assertEqual([v["name"] for v in self.get("/api/vhosts", "mgmt")], ["/"])
            self.assertNotIn("shop", [q["vhost"] for q in self.get("/api/queues", "mon")])
            self.assertIn(("shop", "shop-q"),
                          [(q["vhost"], q["name"]) for q in self.get("/api/queues")])
            self.assertEqual([v["name"] for v in self.get("/api/vhosts")], ["/", "shop"])
            shop.close()
        finally:
            self.wharfctl("delete-vhost", "shop")

    def wharfctl(self, *args):
        subprocess.run([WHARFCTL, "--server", "127.0.0.1:%d" % self.broker.ports["native"],
                        *args], check=True, capture_output=True, timeout=30)

    def wharfctl_output(self, *args):
        return subprocess.run([WHARFCTL, "--server", "127.0.0.1:%d" % self.broker.ports["native"],
                               *args], check=True, capture_output=True, timeout=30,
                              text=True).stdout

    def test_not_found_and_methods(self):
        for path in ["/api/queues/%2F/nope", "/api/queues/no-such-vhost", "/api/nope",
                     "/api/exchanges/%2F/nope", "/api/queues/%2F/orders/nope", "/api"]:
            status, _, body = self.call(path)
            self.assertEqual((status, body), (404, {"error": "Object Not Found",
                                                    "reason": "Not Found"}), path)
        status, headers, body = self.call("/api/queues/%2F/orders", method="POST")
        self.assertEqual((status, body["error"]), (405, "method_not_allowed"))
        self.assertEqual(headers.get("Allow"), "GET, HEAD, PUT, DELETE")
        status, headers, body = self.call("/api/overview", method="DELETE")
        self.assertEqual(status, 405)
        self.assertEqual(headers.get("Allow"), "GET, HEAD")

    def test_every_documented_path_answers(self):
        """docs/http-api.openapi.yaml and the code agree: each path it names answers 200 for
        the administrator, with the list shape it documents."""
        self.declare("docs-q")
        self.channel.exchange_declare("ex1", "direct", durable=True)
        with open(OPENAPI) as f:
            spec = yaml.safe_load(f)
        def url_of(path):
            return (path.replace("{vhost}", "%2F").replace("{source}", "amq.direct")
                    .replace("{kind}", "q").replace("{destination}", "docs-q")
                    .replace("{props}", "~").replace("{id}", "0000000000000001")
                    .replace("{user}", "guest").replace("{limit}", "max-connections")
                    .replace("{name}", "guest" if path.startswith("/api/users/") else
                             "ex1" if path.startswith("/api/exchanges/") else "docs-q"))

        for path, item in spec["paths"].items():
            # Each documented GET answers one of its documented statuses, a list where a list
            # is documented.
            if "get" in item:
                url = url_of(path)
                status, _, body = self.call(url)
                self.assertIn(str(status), item["get"]["responses"], (path, body))
                schema = item["get"]["responses"]["200"].get("content", {}).get(
                    "application/json", {}).get("schema", {})
                if status == 200 and schema.get("type") == "array":
                    self.assertIsInstance(body, list, path)
                    paged = self.get(url + "?page=1&page_size=1")
                    self.assertEqual(paged["page"], 1, path)
            # Each other documented method is taken (a scratch queue; a body may be refused).
            for method in ("put", "post", "delete"):
                if method in item:
                    url = url_of(path).replace("docs-q", "doc-scratch").replace(
                        "/ex1", "/amq.default")
                    status, _ = self.send(method.upper(), url, None if method == "delete" else {})
                    self.assertNotIn(status, (405, 500), (method, path))

    def test_ten_thousand_queues_page_sort_and_filter(self):
        """What an autoscaler or the console asks of a broker with many queues: the deepest
        queues, a page of names, a filter; each one request, whatever the count."""
        for i in range(10000):
            self.channel.queue_declare("many-%05d" % i, durable=False, auto_delete=False)
        self.publish("many-04242", b"deep")
        started = time.monotonic()
        page = self.get("/api/queues/%2F?page=20&page_size=500&name=many-&sort=name"
                        "&columns=name,messages")
        elapsed = time.monotonic() - started
        print("\n10,000 queues: page 20 of 500, sorted by name, in %.3f s" % elapsed)
        self.assertEqual((page["filtered_count"], page["item_count"], page["page_count"]),
                         (10000, 500, 20))
        self.assertEqual(page["items"][-1], {"name": "many-09999", "messages": 0})
        deepest = self.get("/api/queues?page=1&page_size=1&sort=messages&sort_reverse=true"
                           "&name=%5Emany-&use_regex=true&columns=name,messages")
        self.assertEqual(deepest["items"], [{"name": "many-04242", "messages": 1}])
        self.assertEqual(deepest["filtered_count"], 10000)
        for i in range(10000):
            self.channel.queue_delete("many-%05d" % i)

    def test_queues_made_filled_read_and_emptied_as_with_rabbitmq(self):
        q = "/api/queues/%2F/api-q"
        arguments = {"x-max-length": 5, "x-dead-letter-exchange": "",
                     "x-dead-letter-routing-key": "api-q.dlq"}
        self.assertEqual(self.send("PUT", q, {"durable": True, "arguments": arguments}),
                         (201, None))
        self.assertEqual(self.send("PUT", "/api/queues/%2F/api-q.dlq", {}), (201, None))
        self.assertEqual(self.send("PUT", q, {"durable": True, "arguments": arguments}),
                         (204, None))
        status, body = self.send("PUT", q, {"durable": True,
                                            "arguments": dict(arguments, **{"x-max-length": 10})})
        self.assertEqual(status, 400)
        self.assertEqual(body["error"], "bad_request")
        self.assertIn("inequivalent arg 'x-max-length' for queue 'api-q' in vhost '/'",
                      body["reason"])
        self.assertEqual(self.get(q)["arguments"]["x-max-length"], 5)

        publish = "/api/exchanges/%2F/amq.default/publish"
        binary = base64.b64encode(b"\xff\x00two").decode()
        for payload, encoding, properties in [
                ("one", "string", {"content_type": "text/plain", "headers": {"h": "v"}}),
                (binary, "base64", {"delivery_mode": 2}),
                ("three", "string", {"delivery_mode": 2, "priority": 3})]:
            self.assertEqual(self.send("POST", publish, {
                "routing_key": "api-q", "payload": payload, "payload_encoding": encoding,
                "properties": properties}), (200, {"routed": True}))
        self.assertEqual(self.send("POST", publish, {"routing_key": "nowhere", "payload": "x",
                                                     "payload_encoding": "string"}),
                         (200, {"routed": False}))
        status, body = self.send("POST", "/api/exchanges/%2F/nope/publish",
                                 {"routing_key": "x", "payload": "x",
                                  "payload_encoding": "string"})
        self.assertEqual((status, body), (400, {
            "error": "bad_request", "reason": "404 NOT_FOUND - no exchange 'nope' in vhost '/'"}))

        # The requeue modes leave the queue as it was.
        status, got = self.send("POST", q + "/get", {"count": 2, "ackmode": "ack_requeue_true",
                                                     "encoding": "auto", "truncate": 50000})
        self.assertEqual(status, 200, got)
        self.assertEqual([(m["payload"], m["payload_encoding"], m["message_count"])
                          for m in got],
                         [("one", "string", 2), (binary, "base64", 1)])
        self.assertEqual(got[0]["properties"], {"content_type": "text/plain",
                                                "headers": {"h": "v"}})
        self.assertEqual(got[1]["properties"], {"delivery_mode": 2})
        self.assertEqual((got[0]["exchange"], got[0]["routing_key"], got[0]["payload_bytes"]),
                         ("", "api-q", 3))
        self.assertEqual(self.get(q)["messages"], 3)
        # Wharf's peek: every message with its position, headers and deaths, as wharfctl.
        page = self.get(q + "/messages?limit=2")
        self.assertEqual([m["payload"] for m in page["messages"]], ["one", binary])
        self.assertTrue(page["more"])
        rest = self.get(q + "/messages?after=%d" % page["next_after"])
        self.assertEqual([m["payload"] for m in rest["messages"]], ["three"])
        self.assertFalse(rest["more"])
        # Taken: acked, or rejected into the dead-letter queue.
        status, got = self.send("POST", q + "/get", {"count": 1, "ackmode": "ack_requeue_false",
                                                     "encoding": "base64"})
        self.assertEqual(status, 200, got)
        self.assertEqual(got[0]["payload"], base64.b64encode(b"one").decode())
        status, got = self.send("POST", q + "/get", {"count": 1,
                                                     "ackmode": "reject_requeue_false",
                                                     "encoding": "auto"})
        self.assertEqual(status, 200, got)
        self.assertEqual(self.get(q)["messages"], 1)
        dead = self.get("/api/queues/%2F/api-q.dlq/messages")["messages"]
        self.assertEqual([m["deaths"][0]["reason"] for m in dead], ["rejected"])
        for body, reason in [({"count": 1}, "missing: ackmode, encoding"),
                             ({"count": 1, "ackmode": "ack_requeue_true", "encoding": "hex"},
                              "Unsupported encoding. Please use auto or base64."),
                             ({"count": 0, "ackmode": "ack_requeue_true", "encoding": "auto"},
                              "count must be an integer from 1 to 1000")]:
            self.assertEqual(self.send("POST", q + "/get", body),
                             (400, {"error": "bad_request", "reason": reason}))

        self.assertEqual(self.send("DELETE", q + "/contents", None), (204, None))
        self.assertEqual(self.get(q)["messages"], 0)
        self.assertEqual(self.send("DELETE", q, None), (204, None))
        self.assertEqual(self.send("DELETE", q, None),
                         (404, {"error": "Object Not Found", "reason": "Not Found"}))
        self.assertEqual(self.send("DELETE", "/api/queues/%2F/api-q.dlq", None), (204, None))
        status, body = self.send("POST", "/api/queues/%2F/nope/get",
                                 {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"})
        self.assertEqual((status, body), (404, {
            "error": "not_found", "reason": "NOT_FOUND - no queue 'nope' in vhost '/'"}))

    def across_kill_9(self, before, after):
        """Runs `before` against a wharfd of its own, kills it -9, starts another on its data
        directory and runs `after` against that (self.base is each one's in turn)."""
        base = self.base

        def on(step):
            def run(broker):
                self.base = "http://127.0.0.1:%d" % broker.ports["metrics"]
                step()
            return run
        try:
            across_kill_9(WHARFD, on(before), on(after))
        finally:
            self.base = base

    def publish_over_http(self, queue, payload):
        self.assertEqual(self.send("POST", "/api/exchanges/%2F/amq.default/publish", {
            "routing_key": queue, "payload": payload, "payload_encoding": "string",
            "properties": {"delivery_mode": 2}}), (200, {"routed": True}))

    def test_a_publish_answered_survives_kill_9(self):
        """"routed": true is answered once the message is on disk, as a publisher confirm."""
        def before():
            self.assertEqual(self.send("PUT", "/api/queues/%2F/kept", {"durable": True}),
                             (201, None))
            for i in range(20):
                self.publish_over_http("kept", "m%d" % i)

        def after():
            page = self.get("/api/queues/%2F/kept/messages?limit=100")
            self.assertEqual([m["payload"] for m in page["messages"]],
                             ["m%d" % i for i in range(20)])
        self.across_kill_9(before, after)

    def test_policies_over_http_as_with_rabbitmq(self):
        """A policy PUT over HTTP applies at once (a lower max-length trims the queue), shows in
        the queue's object, is RabbitMQ's six-key object, refuses bad input with a 400, needs
        policymaker, and clearing it lifts the limit (docs/policies.md)."""
        self.declare("pol.q")
        for i in range(5):
            self.publish("pol.q", "m%d" % i)
        self.assertEqual(self.get("/api/queues/%2F/pol.q")["policy"], None)
        body = {"pattern": "^pol\\.", "definition": {"max-length": 2, "ha-mode": "all"},
                "priority": 1, "apply-to": "queues"}
        self.assertEqual(self.send("PUT", "/api/policies/%2F/cap", body), (201, None))
        self.assertEqual(self.send("PUT", "/api/policies/%2F/cap", body), (204, None))
        q = self.get("/api/queues/%2F/pol.q")
        self.assertEqual((q["policy"], q["messages_ready"]), ("cap", 2))
        self.assertEqual(q["effective_policy_definition"], {"max-length": 2, "ha-mode": "all"})
        self.assertEqual(q["effective_arguments"], {"x-max-length": 2})
        self.assertEqual(q["arguments"], {})
        page = self.get("/api/queues/%2F/pol.q/messages?limit=10")
        self.assertEqual([m["payload"] for m in page["messages"]], ["m3", "m4"])
        self.assertEqual(self.get("/api/policies/%2F/cap"), {
            "vhost": "/", "name": "cap", "pattern": "^pol\\.", "apply-to": "queues",
            "definition": {"max-length": 2, "ha-mode": "all"}, "priority": 1})
        self.assertIn("cap", [p["name"] for p in self.get("/api/policies")])
        self.assertEqual([p["name"] for p in self.get("/api/policies/%2F")], ["cap"])

        # Bad input: a 400 naming what is wrong; a missing vhost 404; nothing changes.
        for bad, words in [({"definition": {"max-length": 1}}, "pattern"),
                           ({"pattern": ".*"}, "definition"),
                           ({"pattern": ".*", "definition": {}}, "empty"),
                           ({"pattern": ".*", "definition": {"foo": 1}}, "'foo'"),
                           ({"pattern": ".*", "definition": {"max-length": "ten"}}, "integer"),
                           ({"pattern": ".*", "definition": {"max-length": -1}}, "range"),
                           ({"pattern": ".*", "definition": {"overflow": "bogus"}}, "overflow"),
                           ({"pattern": "(", "definition": {"max-length": 1}}, "regular"),
                           ({"pattern": ".*", "definition": {"max-length": 1},
                             "apply-to": "bogus"}, "apply-to"),
                           ({"pattern": ".*", "definition": {"max-length": 1},
                             "priority": "x"}, "priority"),
                           ({"pattern": ".*", "definition": [1]}, "object"),
                           ({"pattern": 5, "definition": {"max-length": 1}}, "string")]:
            status, answer = self.send("PUT", "/api/policies/%2F/bad", bad)
            self.assertEqual((status, answer["error"]), (400, "bad_request"), bad)
            self.assertIn(words, answer["reason"], bad)
        self.assertEqual(self.send("PUT", "/api/policies/nowhere/p", body)[0], 404)
        self.assertEqual(self.call("/api/policies/%2F/bad")[0], 404)

        # Who may: policymaker in its own vhosts, not management.
        status, _, answer = self.call("/api/policies", user="mgmt")
        self.assertEqual((status, answer), (401, {"error": "not_authorised",
                                                  "reason": "Not policymaker user"}))
        self.assertEqual(self.send("PUT", "/api/policies/%2F/cap", body, user="mgmt")[0], 401)
        self.assertEqual(self.send("PUT", "/api/policies/%2F/pm-made", {
            "pattern": "^nothing$", "definition": {"message-ttl": 1000}}, user="pm"), (201, None))
        self.assertEqual(self.send("DELETE", "/api/policies/%2F/pm-made", None, user="pm"),
                         (204, None))
        self.assertEqual(self.send("DELETE", "/api/policies/%2F/pm-made", None)[0], 404)
        # A policymaker only in the vhosts it has permissions in.
        self.wharfctl("add-vhost", "pm-elsewhere")
        try:
            status, answer = self.send("PUT", "/api/policies/pm-elsewhere/p", body, user="pm")
            self.assertEqual((status, answer["reason"]),
                             (401, "User not authorised to access virtual host"))
            self.assertEqual(self.call("/api/policies/pm-elsewhere", user="pm")[0], 401)
            self.assertNotIn("pm-elsewhere", [p["vhost"] for p in self.get("/api/policies", "pm")])
        finally:
            self.wharfctl("delete-vhost", "pm-elsewhere")

        # wharfctl shows the same.
        shown = self.wharfctl_output("list-policies", "--json")
        self.assertEqual([p["name"] for p in json.loads(shown)], ["cap"])
        self.assertIn("policy:              cap", self.wharfctl_output("queue", "show", "pol.q"))

        # Cleared: the limit is lifted.
        self.assertEqual(self.send("DELETE", "/api/policies/%2F/cap", None), (204, None))
        self.assertEqual(self.send("POST", "/api/exchanges/%2F/amq.default/publish", {
            "routing_key": "pol.q", "payload": "m5", "payload_encoding": "string",
            "properties": {}}), (200, {"routed": True}))
        q = self.get("/api/queues/%2F/pol.q")
        self.assertEqual((q["policy"], q["messages_ready"]), (None, 3))

    def test_a_policy_answered_survives_kill_9(self):
        def before():
            self.assertEqual(self.send("PUT", "/api/queues/%2F/capped", {"durable": True}),
                             (201, None))
            self.assertEqual(self.send("PUT", "/api/policies/%2F/cap", {
                "pattern": "^capped$", "definition": {"max-length": 1}}), (201, None))

        def after():
            self.assertEqual(self.get("/api/policies/%2F/cap")["definition"], {"max-length": 1})
            for i in range(3):
                self.publish_over_http("capped", "m%d" % i)
            q = self.get("/api/queues/%2F/capped")
            self.assertEqual((q["policy"], q["messages_ready"]), ("cap", 1))
        self.across_kill_9(before, after)

    def test_exchanges_and_bindings_over_http(self):
        ex = "/api/exchanges/%2F/hx"
        self.assertEqual(self.send("PUT", ex, {"type": "topic", "durable": True}), (201, None))
        self.assertEqual(self.send("PUT", ex, {"type": "topic", "durable": True}), (204, None))
        status, body = self.send("PUT", ex, {"type": "direct", "durable": True})
        self.assertEqual(status, 400)
        self.assertIn("inequivalent arg 'type' for exchange 'hx' in vhost '/'", body["reason"])
        self.assertEqual(self.send("PUT", "/api/exchanges/%2F/bad", {"type": "nope"}),
                         (400, {"error": "bad_request", "reason": "unknown exchange type 'nope'"}))
        self.assertEqual(self.send("PUT", "/api/exchanges/%2F/later", {
            "type": "x-delayed-message", "arguments": {"x-delayed-type": "direct"}}), (201, None))
        self.assertEqual(self.get("/api/exchanges/%2F/later")["type"], "x-delayed-message")
        status, body = self.send("PUT", "/api/exchanges/%2F/amq.default", {"type": "direct"})
        self.assertEqual((status, body["error"]), (401, "not_authorised"))

        self.assertEqual(self.send("PUT", "/api/queues/%2F/hq", {}), (201, None))
        bind = "/api/bindings/%2F/e/hx/q/hq"
        self.assertEqual(self.send("POST", bind, {"routing_key": "a.*"}), (201, None))
        self.assertEqual([(b["routing_key"], b["properties_key"]) for b in self.get(bind)],
                         [("a.*", "a.*")])
        publish = "/api/exchanges/%2F/hx/publish"
        self.assertEqual(self.send("POST", publish, {"routing_key": "a.b", "payload": "x"}),
                         (200, {"routed": True}))
        self.assertEqual(self.send("POST", publish, {"routing_key": "b", "payload": "x"}),
                         (200, {"routed": False}))
        # Exchange to exchange.
        self.assertEqual(self.send("PUT", "/api/exchanges/%2F/hx2", {"type": "fanout"}),
                         (201, None))
        self.assertEqual(self.send("POST", "/api/bindings/%2F/e/hx/e/hx2", {"routing_key": "#"}),
                         (201, None))
        self.assertEqual([b["source"] for b in
                          self.get("/api/exchanges/%2F/hx2/bindings/destination")], ["hx"])
        status, body = self.send("DELETE", ex + "?if-unused=true", None)
        self.assertEqual(status, 400, body)
        # Unbind by the properties key the listing gave.
        self.assertEqual(self.send("DELETE", bind + "/a.*", None), (204, None))
        self.assertEqual(self.send("DELETE", bind + "/a.*", None),
                         (404, {"error": "Object Not Found", "reason": "Not Found"}))
        self.assertEqual(self.send("POST", publish, {"routing_key": "a.b", "payload": "x"}),
                         (200, {"routed": False}))
        self.assertEqual(self.send("DELETE", "/api/bindings/%2F/e/hx/e/hx2/%23", None),
                         (204, None))
        for name in ["hx", "hx2", "later"]:
            self.assertEqual(self.send("DELETE", "/api/exchanges/%2F/" + name, None), (204, None))
        self.assertEqual(self.call(ex)[0], 404)
        self.assertEqual(self.send("DELETE", "/api/queues/%2F/hq", None), (204, None))

    def test_redrive_and_delayed_messages_over_http(self):
        self.assertEqual(self.send("PUT", "/api/queues/%2F/rd.dlq", {}), (201, None))
        self.assertEqual(self.send("PUT", "/api/queues/%2F/rd", {"arguments": {
            "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "rd.dlq"}}), (201, None))
        for i in range(3):
            self.send("POST", "/api/exchanges/%2F/amq.default/publish",
                      {"routing_key": "rd", "payload": "r%d" % i})
        status, got = self.send("POST", "/api/queues/%2F/rd/get", {
            "count": 3, "ackmode": "reject_requeue_false", "encoding": "auto"})
        self.assertEqual((status, len(got)), (200, 3))
        self.assertEqual(self.get("/api/queues/%2F/rd.dlq")["messages"], 3)
        status, started = self.send("POST", "/api/queues/%2F/rd.dlq/redrive", {})
        self.assertEqual(status, 201, started)
        self.assertEqual(started["queue"], "rd.dlq")
        deadline = time.time() + 30
        progress = started
        while progress["state"] == "running" and time.time() < deadline:
            time.sleep(0.1)
            progress = self.get("/api/queues/%2F/rd.dlq/redrive")
        self.assertEqual((progress["state"], progress["moved"], progress["targets"]),
                         ("finished", 3, {"rd": 3}))
        self.assertEqual(self.get("/api/queues/%2F/rd")["messages"], 3)
        self.assertEqual(self.get("/api/queues/%2F/rd.dlq")["messages"], 0)
        self.assertEqual(self.call("/api/queues/%2F/rd/redrive")[0], 404)  # never had one

        # Delayed messages: listed with their time, one cancelled.
        self.assertEqual(self.send("PUT", "/api/exchanges/%2F/dx", {
            "type": "x-delayed-message", "arguments": {"x-delayed-type": "direct"}}), (201, None))
        self.assertEqual(self.send("POST", "/api/bindings/%2F/e/dx/q/rd", {"routing_key": "rd"}),
                         (201, None))
        for i in range(2):
            self.send("POST", "/api/exchanges/%2F/dx/publish", {
                "routing_key": "rd", "payload": "later %d" % i,
                "properties": {"headers": {"x-delay": 600000}}})
        page = self.get("/api/queues/%2F/rd/delayed?limit=1")
        self.assertEqual(len(page["messages"]), 1, page)
        self.assertTrue(page["more"])
        first = page["messages"][0]
        self.assertGreater(first["deliver_at_ms"], time.time() * 1000 + 500000)
        rest = self.get("/api/queues/%2F/rd/delayed?after=" + page["next_after"])
        self.assertEqual(len(rest["messages"]), 1)
        self.assertFalse(rest["more"])
        cancel = "/api/queues/%2F/rd/delayed/" + first["message_id"]
        self.assertEqual(self.send("DELETE", cancel, None), (204, None))
        self.assertEqual(self.send("DELETE", cancel, None)[0], 404)
        self.assertEqual(len(self.get("/api/queues/%2F/rd/delayed")["messages"]), 1)
        for status, body in [self.send("DELETE", "/api/queues/%2F/rd/delayed/xyz", None),
                             self.send("POST", "/api/queues/%2F/rd.dlq/redrive",
                                       {"limit": "all"})]:
            self.assertEqual((status, body["error"]), (400, "bad_request"))
        self.send("DELETE", "/api/exchanges/%2F/dx", None)
        for name in ["rd", "rd.dlq"]:
            self.send("DELETE", "/api/queues/%2F/" + name, None)

    def test_writes_need_the_users_permissions(self):
        # The broker checks an API write as a protocol's: reader may read, not configure.
        status, body = self.send("PUT", "/api/queues/%2F/readers-q", {}, user="reader")
        self.assertEqual((status, body["error"]), (401, "not_authorised"))
        self.assertIn("access to queue 'readers-q' in vhost '/' refused for user 'reader'",
                      body["reason"])
        self.assertEqual(self.send("PUT", "/api/queues/%2F/readers-q", {}, user="mgmt"),
                         (201, None))
        status, body = self.send("DELETE", "/api/queues/%2F/readers-q/contents", None,
                                 user="reader")
        self.assertEqual(status, 204)  # purging is a read permission, as RabbitMQ's
        status, body = self.send("POST", "/api/exchanges/%2F/amq.default/publish",
                                 {"routing_key": "readers-q", "payload": "x",
                                  "payload_encoding": "string"}, user="reader")
        self.assertEqual((status, body["error"]), (401, "not_authorised"))
        status, body = self.send("PUT", "/api/queues/%2F/bad-q", {"durable": "yes"})
        self.assertEqual((status, body["error"]), (400, "bad_request"))
        request = urllib.request.Request(self.base + "/api/queues/%2F/bad-q", method="PUT",
                                         data=b"{not json")
        request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
        self.assertEqual((caught.exception.code, json.loads(caught.exception.read())),
                         (400, {"error": "bad_request", "reason": "not_json"}))
        self.send("DELETE", "/api/queues/%2F/readers-q", None)


    def test_bad_input_gets_a_400_and_never_takes_the_broker_down(self):
        self.assertEqual(self.send("PUT", "/api/queues/%2F/robust", {}), (201, None))
        self.send("POST", "/api/exchanges/%2F/amq.default/publish",
                  {"routing_key": "robust", "payload": "kept"})
        deep = b'{"payload": "x", "properties": ' + b"[" * 200000 + b"]" * 200000 + b"}"
        for path, method, body, words in [
                ("/api/exchanges/%2F/amq.default/publish", "POST", deep,
                 "the body nests deeper than 32 levels"),
                ("/api/queues/%2F/robust2", "PUT", b'{"arguments": {"x": {"type": 1}}}',
                 "header 'x': \"type\" must be a string"),
                ("/api/exchanges/%2F/amq.default/publish", "POST",
                 b'{"payload": "x", "properties": {"headers": {"h": {"type": [], "base64": ""}}}}',
                 "\"type\" must be a string"),
                ("/api/queues/%2F/robust/delayed?after=123", "GET", None, "after must be MS:ID"),
                ("/api/queues/%2F/robust/get", "POST",
                 b'{"count": -1, "ackmode": "ack_requeue_false", "encoding": "auto"}',
                 "count must be an integer from 1 to 1000"),
                ("/api/exchanges/%2F/amq.default/publish", "POST",
                 b'{"payload": "x", "payload_encoding": "base64"}', "not valid base64"),
                ("/api/exchanges/%2F/amq.default/publish", "POST",
                 b'{"payload": "x", "properties": {"priority": "high"}}',
                 "properties.priority must be an integer from 0 to 255")]:
            request = urllib.request.Request(self.base + path, method=method, data=body)
            request.add_header("Content-Type", "application/json")
            request.add_header("Authorization",
                               "Basic " + base64.b64encode(b"guest:guest").decode())
            with self.assertRaises(urllib.error.HTTPError, msg=path) as caught:
                urllib.request.urlopen(request, timeout=30)
            raw = caught.exception.read()
            self.assertEqual(caught.exception.code, 400, (path, raw[:200]))
            answer = json.loads(raw)
            self.assertEqual((caught.exception.code, answer["error"]), (400, "bad_request"),
                             (path, answer))
            self.assertIn(words, answer["reason"], path)
        # A path one segment too long is no operation: the queue is not purged.
        self.assertIn(self.send("DELETE", "/api/queues/%2F/robust/contents/x", None)[0],
                      (404, 405))
        self.assertIn(self.send("POST", "/api/queues/%2F/robust/get/x", {
            "count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"})[0], (404, 405))
        self.assertEqual(self.call("/%61pi/queues")[0], 404)
        self.assertEqual(self.get("/api/queues/%2F/robust")["messages"], 1)
        self.assertEqual(self.send("DELETE", "/api/queues/%2F/robust", None), (204, None))

    def test_binary_values_are_valid_json(self):
        self.channel.queue_declare("bin", durable=False,
                                   arguments={"x-custom": b"\xff\xfe\x00"})
        q = self.get("/api/queues/%2F/bin")
        # pika sends bytes as a long string; one that is not UTF-8 comes back as base64.
        self.assertEqual(q["arguments"]["x-custom"],
                         {"type": "string", "base64": base64.b64encode(b"\xff\xfe\x00").decode()})

    def test_overview_and_vhosts(self):
        overview = self.get("/api/overview")
        self.assertEqual(overview["product_name"], "Wharf")
        self.assertTrue(overview["node"].startswith("wharf@"))
        self.assertGreaterEqual(overview["object_totals"]["queues"], 1)
        self.assertGreaterEqual(overview["object_totals"]["connections"], 1)
        self.assertIn({"node": overview["node"], "protocol": "amqp", "ip_address": "127.0.0.1",
                       "port": self.broker.amqp_port}, overview["listeners"])
        for key in ["messages", "messages_ready", "messages_unacknowledged"]:
            self.assertIn(key, overview["queue_totals"])
        # The totals sampled every 5 s since start, for the console's charts.
        history = self.get("/api/overview/history")
        self.assertEqual(history["interval_ms"], 5000)
        self.assertGreaterEqual(len(history["samples"]), 1)
        self.assertEqual(set(history["samples"][-1]), {
            "timestamp", "publish_rate", "deliver_rate", "ack_rate", "messages_ready",
            "messages_unacknowledged"})
        vhosts = self.get("/api/vhosts")
        self.assertEqual([v["name"] for v in vhosts], ["/"])
        self.assertEqual(self.get("/api/vhosts/%2F")["name"], "/")


if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    WHARFCTL = sys.argv.pop(1)
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
