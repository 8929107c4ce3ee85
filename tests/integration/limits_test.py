#!/usr/bin/python3
"""Per-user and per-channel limits over AMQP (issue 18, "Exposure and resource limits";
docs/security.md): a user's max-connections and max-channels (config users, and stored users
set with wharfctl set-user-limits, kept across a restart) and [limits]
max_consumers_per_channel, each refused with RabbitMQ's 530 NOT_ALLOWED and its words, driven
with Debian's pika against the real wharfd. The native protocol's side: limits_test.cc.

Run by ctest: limits_test.py WHARFD_PATH WHARFCTL_PATH.
"""
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import unittest

import pika

from wharfd_process import Wharfd

WHARFD = None
WHARFCTL = None

# alice / change-me (config/wharfd.toml's example hash) with limits in the config file.
HASH = ("pbkdf2-sha256$20000$e3fa77b999ab7bd3855a8760414e6e90$"
        "7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9")
CONFIG = ('[limits]\nmax_consumers_per_channel = 2\n'
          '[[auth.users]]\nname = "alice"\npassword_hash = "%s"\n'
          'max_connections = 2\nmax_channels = 3\n' % HASH)


class LimitsTest(unittest.TestCase):
    def setUp(self):
        self.broker = Wharfd(WHARFD, CONFIG)
        self.open = []

    def tearDown(self):
        for conn in self.open:
            if conn.is_open:
                conn.close()
        code = self.broker.stop()
        if code != 0:
            print(self.broker.read_log()[-20000:])
        shutil.rmtree(self.broker.dir, ignore_errors=True)
        self.assertEqual(code, 0)

    def connect(self, user="alice", password="change-me"):
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.broker.amqp_port, credentials=pika.PlainCredentials(user, password),
            connection_attempts=1))
        self.open.append(conn)
        return conn

    def connect_soon(self, user="alice", password="change-me"):
        """connect(), retried for 2 s: a closed connection's place is given back when the
        broker sees its socket close, a moment after the client's close returns."""
        deadline = time.time() + 2
        while True:
            try:
                return self.connect(user, password)
            except pika.exceptions.ProbableAccessDeniedError:
                if time.time() > deadline:
                    raise
                time.sleep(0.02)

    def wharfctl(self, *args):
        native = "127.0.0.1:%d" % self.broker.ports["native"]
        run = subprocess.run([WHARFCTL, "--server", native, *args], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(run.returncode, 0, run.stderr)
        return run.stdout

    def test_a_users_connection_limit_refuses_the_next_at_connection_open(self):
        first, second = self.connect(), self.connect()
        # Refused at connection.open: pika reports a close during its handshake this way.
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as refused:
            self.connect()
        self.assertIn('(530) "NOT_ALLOWED - connection refused for user \'alice\': user '
                      'connection limit (2) is reached"', str(refused.exception))
        # Other users are not affected; a closed connection gives its place back.
        self.connect("guest", "guest")
        first.close()
        self.connect_soon()
        self.assertTrue(second.is_open)

    def test_a_users_channel_limit_counts_across_its_connections(self):
        a, b = self.connect(), self.connect()
        a.channel()
        a.channel()
        b.channel()
        with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as closed:
            b.channel()
        self.assertEqual(closed.exception.reply_code, 530)
        self.assertEqual(closed.exception.reply_text,
                         "NOT_ALLOWED - number of channels opened for user 'alice' has reached "
                         "the maximum allowed user limit of (3)")
        # b's channel went with b: one more fits, on another connection, and then no more.
        self.assertTrue(a.is_open)
        c = self.connect_soon()
        c.channel()
        with self.assertRaises(pika.exceptions.ConnectionClosedByBroker):
            c.channel()

    def test_consumers_per_channel_are_limited(self):
        ch = self.connect("guest", "guest").channel()
        ch.queue_declare("many")
        ch.basic_consume("many", lambda *args: None, consumer_tag="one")
        ch.basic_consume("many", lambda *args: None, consumer_tag="two")
        with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as closed:
            ch.basic_consume("many", lambda *args: None, consumer_tag="three")
        self.assertEqual(closed.exception.reply_code, 530)
        self.assertEqual(closed.exception.reply_text,
                         "NOT_ALLOWED - reached maximum (2) of consumers per channel")

    def test_stored_users_limits_are_set_by_wharfctl_and_survive_a_restart(self):
        subprocess.run([WHARFCTL, "--server", "127.0.0.1:%d" % self.broker.ports["native"],
                        "add-user", "bob", "--new-password", "bob-secret"], check=True,
                       capture_output=True, timeout=30)
        # A new user has no permissions (rabbitmqctl add_user): give it some.
        self.wharfctl("set-permissions", "bob", ".*", ".*", ".*")
        self.wharfctl("set-user-limits", "bob", '{"max-connections": 1, "max-channels": 5}')
        listing = self.wharfctl("users")
        self.assertRegex(listing, r"bob\s+store\s+1\s+5\s+\[\]")
        self.assertRegex(listing, r"alice\s+config\s+2\s+3\s+\[administrator\]")
        # A config user's limits are the config file's.
        refused = subprocess.run(
            [WHARFCTL, "--server", "127.0.0.1:%d" % self.broker.ports["native"],
             "set-user-limits", "alice", '{"max-connections": 9}'], capture_output=True,
            text=True, timeout=30)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("defined in the config file", refused.stderr)

        for conn in self.open:
            if conn.is_open:
                conn.close()
        self.assertEqual(self.broker.stop(), 0)
        first = self.broker
        self.broker = Wharfd(WHARFD, CONFIG, data_dir=first.data)
        self.addCleanup(shutil.rmtree, first.dir, True)
        self.connect("bob", "bob-secret")
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as refused:
            self.connect("bob", "bob-secret")
        self.assertIn("user connection limit (1) is reached", str(refused.exception))
        self.wharfctl("clear-user-limits", "bob", "max-connections")
        self.connect("bob", "bob-secret")  # the limit is gone: no wait needed
        self.assertRegex(self.wharfctl("users"), r"bob\s+store\s+-\s+5")


if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    WHARFCTL = sys.argv.pop(1)
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
