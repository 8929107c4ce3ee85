#!/usr/bin/python3
"""Definitions (issue 19; docs/definitions.md) against the real wharfd: a file RabbitMQ 3.10.8
exported (tests/integration/definitions/) imported at start with --definitions, its users
logging in with their RabbitMQ passwords over AMQP (Debian's pika) and HTTP, its topology and
policies in effect; an import that changes nothing the second time; wharfctl export, and a
fresh broker made from that export holding the same definitions; GET and POST
/api/definitions; and a file that cannot be applied stopping the start with a clear error.

Run by ctest: definitions_test.py WHARFD_PATH WHARFCTL_PATH.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import unittest

import pika

from wharfd_process import Wharfd

WHARFD = None
WHARFCTL = None
HERE = os.path.dirname(os.path.abspath(__file__))
EXPORT = os.path.join(HERE, "definitions", "rabbitmq-3.10.8-export.json")
API_EXPORT = os.path.join(HERE, "definitions", "rabbitmq-3.10.8-api.json")
PASSWORDS = {"alice": "secret", "bob": "bobpw", "carol": "c", "guest": "guest"}


def started(*args):
    return Wharfd(WHARFD, extra_args=["--metrics-listen", "127.0.0.1:0", *args])


def call(broker, method, path, user="guest", password=None, body=None):
    """(status, parsed JSON body or None) of an HTTP API request."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (broker.ports["metrics"], path),
                                     method=method, data=data)
    request.add_header("Content-Type", "application/json")
    secret = password if password is not None else PASSWORDS.get(user, "")
    token = base64.b64encode(("%s:%s" % (user, secret)).encode()).decode()
    request.add_header("Authorization", "Basic " + token)
    for _ in range(100):
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        # After a wrong password the login throttle holds this address's logins for 100 ms,
        # answering 429 (docs/security.md).
        if status != 429:
            break
        time.sleep(0.05)
    return status, json.loads(text) if text else None


def wharfctl(broker, *args, check=True, stdin=""):
    return subprocess.run([WHARFCTL, "--server", "127.0.0.1:%d" % broker.ports["native"], *args],
                          check=check, capture_output=True, timeout=120, text=True, input=stdin)


def amqp(broker, user, vhost="/"):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", broker.amqp_port, virtual_host=vhost,
        credentials=pika.PlainCredentials(user, PASSWORDS[user]), connection_attempts=1))


def sections(doc):
    """The definitions of `doc`, each section as a sorted list of canonical JSON texts."""
    return {key: sorted(json.dumps(item, sort_keys=True) for item in doc[key])
            for key in ("users", "vhosts", "permissions", "policies", "queues", "exchanges",
                        "bindings")}


class DefinitionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = started("--definitions", EXPORT)

    @classmethod
    def tearDownClass(cls):
        code = cls.broker.stop_and_remove()
        assert code == 0, code

    def test_rabbitmq_users_log_in_with_their_rabbitmq_passwords(self):
        # HTTP: each with its tags; a wrong password is refused as one.
        self.assertEqual(call(self.broker, "GET", "/api/whoami", "alice"),
                         (200, {"name": "alice", "tags": ["administrator"]}))
        self.assertEqual(call(self.broker, "GET", "/api/whoami", "bob"),
                         (200, {"name": "bob", "tags": ["monitoring", "management"]}))
        status, body = call(self.broker, "GET", "/api/whoami", "carol")
        self.assertEqual((status, body["reason"]), (401, "Not management user"))
        status, body = call(self.broker, "GET", "/api/whoami", "alice", password="wrong")
        self.assertEqual((status, body["error"]), (401, "not_authorized"))
        # AMQP (PLAIN), in the vhosts the file gave them permissions in.
        alice = amqp(self.broker, "alice", "dev")
        alice.channel().queue_declare("work", passive=True)
        alice.close()
        bob = amqp(self.broker, "bob")
        bob.channel().queue_declare("bob.mine")  # configure ^bob\.
        bob.close()
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError):
            amqp(self.broker, "alice", "/")  # no permissions in "/" in the file
        # guest is Wharf's own built-in user: kept as it is (loopback, guest/guest).
        self.assertIn("guest", wharfctl(self.broker, "users").stdout)

    def test_topology_and_policies_are_in_effect(self):
        queues = {(q["vhost"], q["name"]): q for q in call(self.broker, "GET", "/api/queues")[1]}
        self.assertEqual(queues[("/", "q.orders")]["arguments"], {"x-message-ttl": 5000})
        self.assertEqual(queues[("/", "q.orders")]["policy"], "ql")
        self.assertEqual(queues[("/", "q.orders")]["effective_arguments"],
                         {"x-message-ttl": 5000, "x-max-length": 10, "x-overflow": "reject-publish"})
        # A quorum queue's delivery limit (returns) as Wharf's attempts (deliveries).
        self.assertEqual(queues[("/", "q.quorum")]["arguments"]["x-max-attempts"], 6)
        self.assertIn(("dev", "work"), queues)
        self.assertEqual(queues[("dev", "work")]["policy"], "ttl")
        exchanges = {(e["vhost"], e["name"]): e for e in call(self.broker, "GET", "/api/exchanges")[1]}
        self.assertEqual(exchanges[("/", "ex.orders")]["type"], "topic")
        self.assertEqual(exchanges[("/", "ex.orders")]["policy"], "ae")
        self.assertEqual(exchanges[("/", "ex.orders")]["alternate_exchange"], "unrouted")
        self.assertEqual(sorted((p["vhost"], p["name"])
                                for p in call(self.broker, "GET", "/api/policies")[1]
                                if p["vhost"] in ("/", "dev")),
                         [("/", "ae"), ("/", "ql"), ("dev", "ttl")])
        # The binding routes.
        connection = amqp(self.broker, "guest")
        channel = connection.channel()
        channel.confirm_delivery()
        channel.basic_publish("ex.orders", "order.new", b"first order")
        method, _, body = channel.basic_get("q.orders", auto_ack=True)
        self.assertEqual(body, b"first order")
        connection.close()

    def test_importing_again_changes_nothing(self):
        before = call(self.broker, "GET", "/api/definitions")[1]
        done = wharfctl(self.broker, "import", EXPORT, "--json")
        report = json.loads(done.stdout)
        self.assertEqual(report["errors"], [])
        self.assertEqual((report["users"], report["queues"], report["policies"]), (3, 3, 3))
        self.assertTrue(any("guest" in line for line in report["skipped"]), report["skipped"])
        self.assertTrue(any("operator_policy" in line for line in report["skipped"]))
        after = call(self.broker, "GET", "/api/definitions")[1]
        self.assertEqual(sections(before), sections(after))
        # The same over HTTP, RabbitMQ's answer: 204.
        with open(API_EXPORT, "rb") as f:
            self.assertEqual(call(self.broker, "POST", "/api/definitions", "alice", body=f.read()),
                             (204, None))
        self.assertEqual(sections(after), sections(call(self.broker, "GET", "/api/definitions")[1]))

    def test_an_export_makes_the_same_broker_again(self):
        exported = wharfctl(self.broker, "export", "-").stdout
        doc = json.loads(exported)
        self.assertEqual(doc["product_name"], "Wharf")
        alice = [u for u in doc["users"] if u["name"] == "alice"][0]
        self.assertEqual(alice["hashing_algorithm"], "rabbit_password_hashing_sha256")
        self.assertEqual(alice["password_hash"], "6+vDw3jaliAOnpHH0EgShcIAuPZo5tk8gSGneo2cM35a99Mv")
        self.assertNotIn("guest", [u["name"] for u in doc["users"]])
        path = os.path.join(self.broker.dir, "exported.json")
        with open(path, "w") as f:
            f.write(exported)
        second = started("--definitions", path)
        try:
            self.assertEqual(sections(doc),
                             sections(call(second, "GET", "/api/definitions", "alice")[1]))
            connection = amqp(second, "alice", "dev")
            connection.close()
        finally:
            self.assertEqual(second.stop_and_remove(), 0)
        # One vhost's alone, and into another vhost.
        dev = json.loads(wharfctl(self.broker, "export", "-", "--of-vhost", "dev").stdout)
        self.assertEqual([q["name"] for q in dev["queues"]], ["work"])
        self.assertEqual((dev["users"], dev["permissions"]), ([], []))
        self.assertEqual(call(self.broker, "GET", "/api/definitions/dev", "alice")[1]["queues"],
                         dev["queues"])
        wharfctl(self.broker, "add-vhost", "books")
        report = json.loads(wharfctl(self.broker, "import", "-", "--into-vhost", "books", "--json",
                                     stdin=json.dumps(dev)).stdout)
        self.assertEqual((report["queues"], report["policies"], report["errors"]), (1, 1, []))
        self.assertEqual(call(self.broker, "GET", "/api/queues/books/work")[1]["policy"], "ttl")
        self.assertEqual(call(self.broker, "POST", "/api/definitions/books", "alice",
                              body=call(self.broker, "GET", "/api/definitions")[1]), (204, None))
        self.assertEqual(call(self.broker, "GET", "/api/queues/books/q.orders")[0], 200)

    def test_who_may_and_bad_documents(self):
        status, body = call(self.broker, "GET", "/api/definitions", "bob")
        self.assertEqual((status, body["reason"]), (401, "Not administrator user"))
        self.assertEqual(call(self.broker, "POST", "/api/definitions", "bob", body={})[0], 401)
        self.assertEqual(wharfctl(self.broker, "--user", "bob", "--password", "bobpw", "export",
                                  "-", check=False).returncode, 1)
        status, body = call(self.broker, "POST", "/api/definitions", body=b"{not json")
        self.assertEqual((status, body["error"]), (400, "bad_request"))
        self.assertIn("not JSON", body["reason"])
        status, body = call(self.broker, "POST", "/api/definitions",
                            body={"queues": [{"name": "x", "durable": "yes"}]})
        self.assertEqual((status, body["reason"]),
                         (400, 'queues[0]: "durable" must be true or false'))
        # Refused items are reported; the rest goes in.
        status, body = call(self.broker, "POST", "/api/definitions", body={
            "queues": [{"name": "q.orders", "vhost": "/", "durable": True,
                        "arguments": {"x-message-ttl": 1}},
                       {"name": "made-anyway", "vhost": "/", "durable": True}],
            "policies": [{"vhost": "/", "name": "bad", "pattern": ".*",
                          "definition": {"max-lenght": 1}}]})
        self.assertEqual(status, 400)
        self.assertEqual(len(body["report"]["errors"]), 2, body)
        self.assertIn("inequivalent arg 'x-message-ttl'", body["report"]["errors"][1])
        self.assertEqual(body["report"]["queues"], 1)
        self.assertEqual(call(self.broker, "GET", "/api/queues/%2F/made-anyway")[0], 200)
        done = wharfctl(self.broker, "import", "-", check=False, stdin="")
        self.assertEqual(done.returncode, 1)  # not JSON
        self.assertIn("not JSON", done.stderr)

    def test_guest_is_never_imported_and_rabbitmq_leftovers_are_kept(self):
        # Without Wharf's loopback guest, RabbitMQ's guest/guest administrator must not appear
        # from the file (it would be reachable from anywhere).
        broker = Wharfd(WHARFD, "[auth]\nloopback_guest = false\n",
                        extra_args=["--metrics-listen", "127.0.0.1:0", "--definitions", EXPORT])
        try:
            self.assertEqual(call(broker, "GET", "/api/whoami", "guest")[0], 401)
            self.assertEqual(call(broker, "GET", "/api/whoami", "alice")[0], 200)
            # A user without a password is skipped; a policy's list (ha-params) is kept.
            status, body = call(broker, "POST", "/api/definitions", "alice", body={
                "users": [{"name": "nopass", "password_hash": "", "tags": []}],
                "policies": [{"vhost": "/", "name": "ha", "pattern": "^nothing$", "definition":
                              {"ha-mode": "nodes", "ha-params": ["rabbit@a", "rabbit@b"]}}]})
            self.assertEqual((status, body), (204, None))
            self.assertEqual(call(broker, "GET", "/api/policies/%2F/ha", "alice")[1]["definition"],
                             {"ha-mode": "nodes", "ha-params": ["rabbit@a", "rabbit@b"]})
            self.assertEqual(call(broker, "GET", "/api/whoami", "nopass", password="")[0], 401)
        finally:
            self.assertEqual(broker.stop_and_remove(), 0)

    def test_a_file_that_cannot_be_applied_stops_the_start(self):
        directory = tempfile.mkdtemp(prefix="wharf-defs-")
        try:
            bad = os.path.join(directory, "bad.json")
            with open(bad, "w") as f:
                json.dump({"queues": [{"name": "q", "vhost": "nowhere", "durable": True}]}, f)
            for path, words in [(bad, "queue 'q' in vhost 'nowhere': no such vhost"),
                                (os.path.join(directory, "missing.json"), "cannot read")]:
                done = subprocess.run([WHARFD, "--listen", "127.0.0.1:0", "--amqp-listen",
                                       "127.0.0.1:0", "--data-dir",
                                       os.path.join(directory, "data"), "--definitions", path],
                                      capture_output=True, text=True, timeout=60)
                self.assertNotEqual(done.returncode, 0)
                self.assertIn(words, done.stderr + done.stdout)
        finally:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    WHARFD, WHARFCTL = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
