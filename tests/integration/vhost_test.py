#!/usr/bin/python3
"""Virtual hosts over AMQP (issue 18; docs/security.md, "Virtual hosts"), driven with Debian's
pika against the real wharfd: connection.open into a vhost, the same names in two vhosts being
two queues, RabbitMQ's 404 and 530 texts naming the vhost, the vhost's max-connections and
max-queues, and a deleted vhost's connections closed with 320. The texts are those Debian's
RabbitMQ 3.10.8 gives (docs/security.md). The native protocol's side: vhost_test.cc.

Run by ctest: vhost_test.py WHARFD_PATH WHARFCTL_PATH.
"""
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import unittest

import pika

from wharfd_process import Wharfd

WHARFD = None
WHARFCTL = None

# Every user's password is change-me (config/wharfd.toml's example hash). "shopper" may use the
# vhost "shop" (which need not exist yet for the config to name it), and nothing in "/".
HASH = ("pbkdf2-sha256$20000$e3fa77b999ab7bd3855a8760414e6e90$"
        "7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9")
CONFIG = ('[[auth.users]]\nname = "shopper"\npassword_hash = "%(h)s"\ntags = []\n'
          'permissions = [{vhost = "shop", configure = ".*", write = ".*", read = ".*"}]\n'
          % {"h": HASH})


class VhostTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = Wharfd(WHARFD, CONFIG)

    @classmethod
    def tearDownClass(cls):
        code = cls.broker.stop()
        if code != 0:
            print(cls.broker.read_log()[-20000:])
        shutil.rmtree(cls.broker.dir, ignore_errors=True)
        assert code == 0, code

    def setUp(self):
        self.wharfctl("add-vhost", "shop")

    def tearDown(self):
        self.wharfctl("delete-vhost", "shop", check=False)

    def connect(self, vhost, user="shopper", password="change-me"):
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.broker.amqp_port, virtual_host=vhost,
            credentials=pika.PlainCredentials(user, password), connection_attempts=1))

    def wharfctl(self, *args, check=True):
        result = subprocess.run(
            [WHARFCTL, "--server", "127.0.0.1:%d" % self.broker.ports["native"], *args],
            capture_output=True, text=True, timeout=30)
        if check:
            self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_the_same_names_in_two_vhosts_are_two_queues(self):
        shop = self.connect("shop")
        root = self.connect("/", "guest", "guest")
        sch, rch = shop.channel(), root.channel()
        sch.queue_declare("orders")
        rch.queue_declare("orders")
        sch.confirm_delivery()
        rch.confirm_delivery()
        for body in (b"shop 1", b"shop 2"):
            sch.basic_publish("", "orders", body)
        rch.basic_publish("", "orders", b"root")
        self.assertEqual(sch.queue_declare("orders", passive=True).method.message_count, 2)
        self.assertEqual(rch.queue_declare("orders", passive=True).method.message_count, 1)
        # Each vhost has its own amq.* exchanges and its own bindings.
        sch.queue_bind("orders", "amq.topic", "a.#")
        rch.basic_publish("amq.topic", "a.b", b"unrouted in /")
        sch.basic_publish("amq.topic", "a.b", b"shop 3")
        bodies = []
        for _ in range(3):
            method, _, body = sch.basic_get("orders", auto_ack=True)
            self.assertIsNotNone(method)
            bodies.append(body)
        self.assertEqual(bodies, [b"shop 1", b"shop 2", b"shop 3"])
        self.assertEqual(rch.basic_get("orders", auto_ack=True)[2], b"root")
        # A queue of one vhost is not found from another, in RabbitMQ's words naming the vhost.
        sch.queue_declare("only-in-shop")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            rch.queue_declare("only-in-shop", passive=True)
        self.assertEqual(closed.exception.reply_code, 404)
        self.assertEqual(closed.exception.reply_text,
                         "NOT_FOUND - no queue 'only-in-shop' in vhost '/'")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            sch.exchange_declare("missing", passive=True)
        self.assertEqual(closed.exception.reply_text,
                         "NOT_FOUND - no exchange 'missing' in vhost 'shop'")
        rch = root.channel()
        rch.queue_delete("orders")
        shop.close()
        root.close()

    def test_connection_open_is_refused_with_rabbitmqs_530(self):
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as closed:
            self.connect("nowhere", "guest", "guest")
        self.assertIn("(530)", str(closed.exception))
        self.assertIn("NOT_ALLOWED - vhost nowhere not found", str(closed.exception))
        # guest has permissions in "/" only; shopper in "shop" only.
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as closed:
            self.connect("shop", "guest", "guest")
        self.assertIn('(530) "NOT_ALLOWED - access to vhost \'shop\' refused for user \'guest\'"',
                      str(closed.exception))
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as closed:
            self.connect("/")
        self.assertIn("access to vhost '/' refused for user 'shopper'", str(closed.exception))
        # RabbitMQ's order: existence, then the vhost's connection limit, then permissions.
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as closed:
            self.connect("nowhere")
        self.assertIn("NOT_ALLOWED - vhost nowhere not found", str(closed.exception))
        self.wharfctl("set-vhost-limits", "shop", '{"max-connections": 0}')
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as closed:
            self.connect("shop", "guest", "guest")
        self.assertIn("NOT_ALLOWED - access to vhost 'shop' refused for user 'guest': connection "
                      "limit (0) is reached", str(closed.exception))

    def test_max_connections_and_max_queues(self):
        self.wharfctl("set-vhost-limits", "shop", '{"max-connections": 1, "max-queues": 1}')
        first = self.connect("shop")
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as closed:
            self.connect("shop")
        self.assertIn('(530) "NOT_ALLOWED - access to vhost \'shop\' refused for user '
                      '\'shopper\': connection limit (1) is reached"', str(closed.exception))
        ch = first.channel()
        ch.queue_declare("a")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.queue_declare("b")
        self.assertEqual(closed.exception.reply_code, 406)
        self.assertEqual(closed.exception.reply_text,
                         "PRECONDITION_FAILED - cannot declare queue 'b': queue limit in vhost "
                         "'shop' (1) is reached")
        first.close()
        self.wharfctl("clear-vhost-limits", "shop", "all")
        second, third = self.connect("shop"), self.connect("shop")
        second.channel().queue_declare("b")
        second.close()
        third.close()

    def test_a_deleted_vhosts_connections_are_closed(self):
        shop = self.connect("shop")
        ch = shop.channel()
        ch.queue_declare("orders")
        root = self.connect("/", "guest", "guest")
        self.wharfctl("delete-vhost", "shop")
        with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as closed:
            for _ in range(50):
                shop.process_data_events(time_limit=0.1)
        self.assertEqual(closed.exception.reply_code, 320)
        self.assertEqual(closed.exception.reply_text,
                         "CONNECTION_FORCED - vhost 'shop' is deleted")
        self.assertTrue(root.is_open, "other vhosts' connections stay")
        root.close()
        listed = self.wharfctl("vhosts", "--json").stdout
        self.assertNotIn('"shop"', listed)


if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    WHARFCTL = sys.argv.pop(1)
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
