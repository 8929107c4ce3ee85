#!/usr/bin/python3
"""Users, permissions, vhosts and limits managed over the HTTP API of the real wharfd (issue 19;
docs/http-api.md), the way scripts written for RabbitMQ's management API manage them (urllib and
json): RabbitMQ's paths, statuses and error bodies (measured against 3.10.8), the changes taking
effect for logins over AMQP (Debian's pika) and surviving kill -9; and Wharf's move and requeue
over HTTP.

Run by ctest: http_admin_test.py WHARFD_PATH.
"""
import json
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import unittest

import pika

from api_request import api_request
from wharfd_process import Wharfd, across_kill_9

WHARFD = None

# The config file's users' password is change-me (config/wharfd.toml's example hash).
HASH = ("pbkdf2-sha256$20000$e3fa77b999ab7bd3855a8760414e6e90$"
        "7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9")
CONFIG = ('[[auth.users]]\nname = "mgmt"\npassword_hash = "%s"\ntags = ["management"]\n'
          'permissions = [{vhost = "/", configure = ".*", write = ".*", read = ".*"}]\n' % HASH)
# RabbitMQ 3.10.8's hash of "secret" (tests/integration/definitions/).
RABBIT_SECRET = "6+vDw3jaliAOnpHH0EgShcIAuPZo5tk8gSGneo2cM35a99Mv"
EVERYTHING = {"configure": ".*", "write": ".*", "read": ".*"}


class HttpAdminTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = Wharfd(WHARFD, CONFIG, extra_args=["--metrics-listen", "127.0.0.1:0"])
        cls.base = "http://127.0.0.1:%d" % cls.broker.ports["metrics"]

    @classmethod
    def tearDownClass(cls):
        assert cls.broker.stop_and_remove() == 0

    def send(self, method, path, body=None, user="guest", password="guest", raw=None):
        """(status, parsed JSON body or None, headers); `raw`: bytes sent as they are."""
        status, headers, reply = api_request(self.base + path, method, user, password, body, raw)
        return status, json.loads(reply) if reply else None, headers

    def call(self, method, path, body=None, **kwargs):
        """(status, parsed JSON body or None)."""
        return self.send(method, path, body, **kwargs)[:2]

    def get(self, path, **kwargs):
        status, body = self.call("GET", path, **kwargs)
        self.assertEqual(status, 200, (path, body))
        return body

    def logs_in(self, user, password):
        return self.call("GET", "/api/whoami", user=user, password=password)[0] == 200

    def amqp(self, user, password, vhost="/", port=None):
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", port or self.broker.amqp_port, vhost,
            credentials=pika.PlainCredentials(user, password), connection_attempts=1))

    def bad_request(self, reason):
        return (400, {"error": "bad_request", "reason": reason})

    def test_users_are_made_changed_and_deleted_as_with_rabbitmq(self):
        body = {"password": "pw1", "tags": "management, policymaker"}
        self.assertEqual(self.call("PUT", "/api/users/alice", body), (201, None))
        self.assertEqual(self.call("PUT", "/api/users/alice", body), (204, None))
        alice = self.get("/api/users/alice")
        self.assertEqual((alice["name"], alice["tags"], alice["source"]),
                         ("alice", ["management", "policymaker"], "store"))
        self.assertTrue(self.logs_in("alice", "pw1"))
        self.assertFalse(self.logs_in("alice", "wrong"))
        # Tags as a list; a new password takes effect at once, the old one is refused at once
        # (however recently it passed: the credential cache is keyed by the stored hash).
        self.assertEqual(self.call("PUT", "/api/users/alice",
                                   {"password": "pw2", "tags": ["management"]}), (204, None))
        self.assertFalse(self.logs_in("alice", "pw1"))
        self.assertTrue(self.logs_in("alice", "pw2"))
        self.assertEqual(self.get("/api/users/alice")["tags"], ["management"])
        # RabbitMQ's hash, under its hashing_algorithm (the default): its password logs in.
        self.assertEqual(self.call("PUT", "/api/users/rabbit", {
            "password_hash": RABBIT_SECRET, "tags": "monitoring"}), (201, None))
        self.assertTrue(self.logs_in("rabbit", "secret"))
        # No password: an existing user's is cleared, as RabbitMQ's PUT does.
        self.assertEqual(self.call("PUT", "/api/users/rabbit", {"tags": "monitoring"}),
                         (204, None))
        self.assertFalse(self.logs_in("rabbit", "secret"))
        self.assertEqual(self.call("PUT", "/api/users/nopass", {"tags": ""}), (201, None))
        self.assertFalse(self.logs_in("nopass", ""))
        # Limits in the body.
        self.assertEqual(self.call("PUT", "/api/users/limited", {
            "password": "x", "tags": [], "limits": {"max-connections": 3}}), (201, None))
        self.assertEqual(self.get("/api/users/limited")["limits"], {"max-connections": 3})

        for name in ["alice", "rabbit", "nopass", "limited"]:
            self.assertEqual(self.call("DELETE", "/api/users/" + name), (204, None))
        self.assertEqual(self.call("DELETE", "/api/users/alice"),
                         (404, {"error": "Object Not Found", "reason": "Not Found"}))
        self.assertEqual(self.call("GET", "/api/users/alice")[0], 404)
        self.assertFalse(self.logs_in("alice", "pw2"))

    def test_bad_user_bodies_get_rabbitmqs_400s(self):
        for body, reason in [
                ({"password": "x"}, "tags_not_present"),
                ({}, "tags_not_present"),
                ({"password": "x", "password_hash": RABBIT_SECRET, "tags": ""},
                 "both_password_and_password_hash_are_provided"),
                ({"password": 5, "tags": ""},
                 "password, password_hash and hashing_algorithm must be strings"),
                ({"password": "x", "tags": 5}, '"tags" must be an array or a string'),
                ({"password": "x", "tags": [1]}, '"tags" must be strings'),
                ({"password_hash": "!!!notbase64", "tags": ""},
                 "password_hash does not decode as its hashing_algorithm says"),
                ({"password_hash": RABBIT_SECRET, "hashing_algorithm": "bcrypt", "tags": ""},
                 "hashing_algorithm 'bcrypt' is not one Wharf verifies "
                 "(rabbit_password_hashing_sha256, _sha512, _md5, or wharf_pbkdf2_sha256)"),
                ({"password": "x", "tags": "", "limits": {"max-queues": 1}},
                 "limits: 'max-queues' is not a user limit (max-connections, max-channels)")]:
            self.assertEqual(self.call("PUT", "/api/users/bad", body), self.bad_request(reason),
                             body)
        for raw in [b"not json", b"[1]", b"42"]:
            self.assertEqual(self.send("PUT", "/api/users/bad", raw=raw)[:2],
                             self.bad_request("not_json"))
        self.assertEqual(self.call("GET", "/api/users/bad")[0], 404)  # nothing was made
        # Users of the config file and the built-in guest are not the API's to change.
        status, body = self.call("PUT", "/api/users/mgmt", {"password": "x", "tags": ""})
        self.assertEqual(status, 400)
        self.assertIn("defined in the config file", body["reason"])
        self.assertEqual(self.call("DELETE", "/api/users/guest")[0], 400)

    def test_only_administrators_manage_users_vhosts_and_permissions(self):
        refused = (401, {"error": "not_authorised", "reason": "Not administrator user"})
        for method, path, body in [
                ("PUT", "/api/users/x", {"password": "x", "tags": ""}),
                ("DELETE", "/api/users/guest", None),
                ("POST", "/api/users/bulk-delete", {"users": ["guest"]}),
                ("PUT", "/api/vhosts/x", None),
                ("DELETE", "/api/vhosts/%2F", None),
                ("PUT", "/api/permissions/%2F/mgmt", EVERYTHING),
                ("DELETE", "/api/permissions/%2F/mgmt", None),
                ("GET", "/api/permissions/%2F/mgmt", None),
                ("PUT", "/api/user-limits/mgmt/max-connections", {"value": 1}),
                ("PUT", "/api/vhost-limits/%2F/max-queues", {"value": 1})]:
            self.assertEqual(self.call(method, path, body, user="mgmt", password="change-me"),
                             refused, (method, path))
        self.assertEqual(self.get("/api/vhosts"), self.get("/api/vhosts", user="mgmt",
                                                           password="change-me"))
        # Each user reads its own limits.
        self.assertEqual(self.get("/api/user-limits", user="mgmt", password="change-me"), [])

    def test_permissions(self):
        self.assertEqual(self.call("PUT", "/api/users/perm", {"password": "p", "tags": ""}),
                         (201, None))
        path = "/api/permissions/%2F/perm"
        self.assertEqual(self.call("GET", path)[0], 404)
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError):
            self.amqp("perm", "p")  # no permissions in "/" yet
        self.assertEqual(self.call("PUT", path, EVERYTHING), (201, None))
        self.assertEqual(self.call("PUT", path, EVERYTHING), (204, None))
        self.assertEqual(self.get(path), {"user": "perm", "vhost": "/", **EVERYTHING})
        connection = self.amqp("perm", "p")
        connection.channel().queue_declare("perm.q")
        connection.close()
        self.assertEqual(self.call("PUT", path, {"configure": "", "write": "", "read": "^x$"}),
                         (204, None))
        self.assertEqual(self.get(path)["read"], "^x$")
        for body, reason in [
                ({"configure": ".*"}, "configure, write and read are needed; missing: write, read"),
                ({"configure": 1, "write": "", "read": ""},
                 "configure must be a string (a regular expression)")]:
            self.assertEqual(self.call("PUT", path, body), self.bad_request(reason))
        status, body = self.call("PUT", path, {"configure": "(", "write": "", "read": ""})
        self.assertEqual(status, 400)
        self.assertIn("(", body["reason"])
        for other in ["/api/permissions/%2F/nobody", "/api/permissions/nowhere/perm"]:
            self.assertEqual(self.call("PUT", other, EVERYTHING),
                             self.bad_request("vhost_or_user_not_found"))
            self.assertEqual(self.call("DELETE", other)[0], 404)
        self.assertEqual(self.get(path)["read"], "^x$")  # the refusals changed nothing
        self.assertIn({"user": "perm", "vhost": "/", "configure": "", "write": "",
                       "read": "^x$"}, self.get("/api/users/perm/permissions"))
        self.assertEqual(self.call("DELETE", path), (204, None))
        self.assertEqual(self.call("DELETE", path)[0], 404)
        self.assertEqual(self.call("DELETE", "/api/users/perm"), (204, None))

    def test_vhosts(self):
        # guest is built in: the vhosts it makes grant it nothing. An administrator made over
        # HTTP is granted everything in the vhosts it makes, as RabbitMQ's maker is.
        self.assertEqual(self.call("PUT", "/api/users/boss",
                                   {"password": "b", "tags": "administrator"}), (201, None))
        self.assertEqual(self.call("PUT", "/api/vhosts/made", {"description": "made here"},
                                   user="boss", password="b"), (201, None))
        self.assertEqual(self.call("PUT", "/api/vhosts/made", None), (204, None))
        made = self.get("/api/vhosts/made")
        self.assertEqual((made["name"], made["description"]), ("made", "made here"))
        self.assertEqual(self.get("/api/permissions/made/boss"),
                         {"user": "boss", "vhost": "made", **EVERYTHING})
        connection = self.amqp("boss", "b", "made")
        connection.channel().queue_declare("in.made")
        # Deleting it deletes what is in it, its permissions, and closes its connections.
        self.assertEqual(self.call("DELETE", "/api/vhosts/made"), (204, None))
        with self.assertRaises(pika.exceptions.ConnectionClosed):
            for _ in range(50):
                connection.process_data_events(0.1)
        self.assertEqual(self.call("GET", "/api/vhosts/made")[0], 404)
        self.assertEqual(self.call("GET", "/api/permissions/made/boss")[0], 404)
        self.assertEqual(self.call("DELETE", "/api/vhosts/made"),
                         (404, {"error": "Object Not Found", "reason": "Not Found"}))
        status, body = self.call("DELETE", "/api/vhosts/%2F")
        self.assertEqual(status, 400)
        self.assertIn("cannot be deleted", body["reason"])
        self.assertEqual(self.call("PUT", "/api/vhosts/x", {"description": 5}),
                         self.bad_request("description must be a string"))
        self.assertEqual(self.call("DELETE", "/api/users/boss"), (204, None))

    def test_limits(self):
        self.assertEqual(self.call("PUT", "/api/users/lim", {"password": "l", "tags": ""}),
                         (201, None))
        self.assertEqual(self.call("PUT", "/api/permissions/%2F/lim", EVERYTHING), (201, None))
        path = "/api/user-limits/lim/max-connections"
        self.assertEqual(self.call("PUT", path, {"value": 1}), (204, None))
        self.assertEqual(self.get("/api/user-limits/lim"),
                         [{"user": "lim", "value": {"max-connections": 1}}])
        self.assertIn({"user": "lim", "value": {"max-connections": 1}},
                      self.get("/api/user-limits"))
        first = self.amqp("lim", "l")
        with self.assertRaises(pika.exceptions.AMQPConnectionError):
            self.amqp("lim", "l")  # the second is over the limit
        first.close()
        self.assertEqual(self.call("DELETE", path), (204, None))
        self.assertEqual(self.get("/api/user-limits/lim"), [])
        self.amqp("lim", "l").close()
        self.assertEqual(self.call("GET", "/api/user-limits/nobody")[0], 404)
        for bad_path, body, reason in [
                ("/api/user-limits/lim/max-foo", {"value": 1},
                 "'max-foo' is not a user limit (max-connections, max-channels)"),
                (path, {"value": "x"}, 'max-connections should be an integer, actually was "x"'),
                (path, {"value": 1.5}, "max-connections should be an integer, actually was 1.5"),
                (path, {}, 'the body has no "value"'),
                ("/api/user-limits/nobody/max-channels", {"value": 1}, "no_such_user: 'nobody'"),
                ("/api/vhost-limits/%2F/max-channels", {"value": 1},
                 "'max-channels' is not a vhost limit (max-connections, max-queues)")]:
            self.assertEqual(self.call("PUT", bad_path, body), self.bad_request(reason))
        self.assertEqual(self.send("GET", path)[2]["Allow"], "PUT, DELETE")

        vpath = "/api/vhost-limits/%2F/max-queues"
        self.assertEqual(self.call("PUT", vpath, {"value": 100}), (204, None))
        self.assertEqual(self.get("/api/vhost-limits/%2F"),
                         [{"vhost": "/", "value": {"max-queues": 100}}])
        self.assertEqual(self.get("/api/vhosts/%2F")["limits"], {"max-queues": 100})
        self.assertEqual(self.call("DELETE", vpath), (204, None))
        self.assertEqual(self.get("/api/vhost-limits"), [])
        self.assertEqual(self.call("PUT", "/api/vhost-limits/nowhere/max-queues",
                                   {"value": 1})[0], 404)
        self.assertEqual(self.call("DELETE", "/api/users/lim"), (204, None))

    def test_deleting_a_user_closes_its_connections(self):
        self.assertEqual(self.call("PUT", "/api/users/gone", {"password": "g", "tags": ""}),
                         (201, None))
        self.assertEqual(self.call("PUT", "/api/permissions/%2F/gone", EVERYTHING), (201, None))
        connection = self.amqp("gone", "g")
        self.assertEqual(self.call("DELETE", "/api/users/gone"), (204, None))
        with self.assertRaises(pika.exceptions.ConnectionClosed) as closed:
            for _ in range(50):
                connection.process_data_events(0.1)
        self.assertEqual(closed.exception.reply_code, 320)
        self.assertIn("user 'gone' is deleted", closed.exception.reply_text)

    def test_bulk_delete_stops_at_a_missing_user(self):
        for name in ["b1", "b2", "b3"]:
            self.assertEqual(self.call("PUT", "/api/users/" + name, {"tags": ""}), (201, None))
        self.assertEqual(self.call("POST", "/api/users/bulk-delete",
                                   {"users": ["b1", "nosuch", "b3"]}),
                         self.bad_request("no_such_user: 'nosuch'"))
        # As RabbitMQ: what went before the missing one is deleted, what came after is not.
        self.assertEqual(self.call("GET", "/api/users/b1")[0], 404)
        self.assertEqual(self.call("GET", "/api/users/b3")[0], 200)
        self.assertEqual(self.call("POST", "/api/users/bulk-delete", {"users": ["b2", "b3"]}),
                         (204, None))
        self.assertEqual(self.call("GET", "/api/users/b2")[0], 404)
        self.assertEqual(self.call("POST", "/api/users/bulk-delete", {}),
                         self.bad_request('the body has no "users"'))
        self.assertEqual(self.send("GET", "/api/users/bulk-delete")[2]["Allow"], "POST")
        self.assertEqual(self.send("POST", "/api/users/guest")[2]["Allow"],
                         "GET, HEAD, PUT, DELETE")

    def test_move_and_requeue(self):
        for name in ["mv.src", "mv.dst"]:
            self.assertEqual(self.call("PUT", "/api/queues/%2F/" + name, {"durable": True}),
                             (201, None))
        for i in range(3):
            self.assertEqual(self.call("POST", "/api/exchanges/%2F/amq.default/publish", {
                "routing_key": "mv.src", "payload": "m%d" % i, "payload_encoding": "string",
                "properties": {"delivery_mode": 2}}), (200, {"routed": True}))
        status, started = self.call("POST", "/api/queues/%2F/mv.src/move", {"to": "mv.dst"})
        self.assertEqual(status, 201, started)
        self.assertEqual(started["to"], "mv.dst")
        self.wait_finished("mv.src")
        page = self.get("/api/queues/%2F/mv.dst/messages?limit=10")
        self.assertEqual([m["payload"] for m in page["messages"]], ["m0", "m1", "m2"])
        # Requeue one, by id, to another queue.
        one = page["messages"][1]["message_id"]
        status, started = self.call("POST", "/api/queues/%2F/mv.dst/requeue",
                                    {"message_id": one, "to": "mv.src"})
        self.assertEqual(status, 201, started)
        self.wait_finished("mv.dst")
        self.assertEqual([m["payload"] for m in
                          self.get("/api/queues/%2F/mv.src/messages?limit=10")["messages"]], ["m1"])
        self.assertEqual(self.call("POST", "/api/queues/%2F/mv.src/move", {}),
                         self.bad_request('a move needs "to", a queue'))
        self.assertEqual(self.call("POST", "/api/queues/%2F/mv.src/requeue", {"to": "mv.dst"}),
                         self.bad_request('a requeue needs "message_id", a hex message id'))
        self.assertEqual(self.call("POST", "/api/queues/%2F/nosuch/move", {"to": "mv.dst"})[0],
                         404)

    def wait_finished(self, queue):
        for _ in range(200):
            progress = self.get("/api/queues/%2F/" + queue + "/redrive")
            if progress["state"] != "running":
                break
            time.sleep(0.05)
        self.assertEqual(progress["state"], "finished", progress)

    def test_changes_answered_survive_kill_9(self):
        base = self.base

        def before(first):
            self.base = "http://127.0.0.1:%d" % first.ports["metrics"]
            self.assertEqual(self.call("PUT", "/api/vhosts/kept"), (201, None))
            self.assertEqual(self.call("PUT", "/api/users/kept", {"password": "k", "tags": "x"}),
                             (201, None))
            self.assertEqual(self.call("PUT", "/api/permissions/kept/kept", EVERYTHING),
                             (201, None))
            self.assertEqual(self.call("PUT", "/api/vhost-limits/kept/max-queues",
                                       {"value": 7}), (204, None))

        def after(second):
            self.base = "http://127.0.0.1:%d" % second.ports["metrics"]
            self.assertEqual(self.get("/api/vhost-limits/kept"),
                             [{"vhost": "kept", "value": {"max-queues": 7}}])
            self.assertEqual(self.get("/api/users/kept")["tags"], ["x"])
            self.assertEqual(self.get("/api/permissions/kept/kept")["read"], ".*")
            # Its password and its permissions: an AMQP login into "kept".
            self.amqp("kept", "k", "kept", port=second.amqp_port).close()
        try:
            across_kill_9(WHARFD, before, after)
        finally:
            self.base = base

if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
