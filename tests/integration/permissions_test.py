#!/usr/bin/python3
"""Users, permissions and tags over AMQP (issue 18; docs/security.md, "Permissions"), driven
with Debian's pika against the real wharfd: each AMQP operation allowed and refused with
RabbitMQ's 403 ACCESS_REFUSED words (the channel closes, the connection stays), a user without
permissions in the vhost refused at connection.open with 530, the user-id property checked
against the login, the metrics for monitoring users only, and wharfctl's set-permissions,
set-user-tags, list-permissions and clear-permissions. The native protocol's side:
permissions_test.cc.

Run by ctest: permissions_test.py WHARFD_PATH WHARFCTL_PATH.
"""
import base64
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import unittest

import pika

from wharfd_process import Wharfd

WHARFD = None
WHARFCTL = None

# Every user's password is change-me (config/wharfd.toml's example hash).
HASH = ("pbkdf2-sha256$20000$e3fa77b999ab7bd3855a8760414e6e90$"
        "7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9")
CONFIG = ('[server]\nmetrics_auth = true\n'
          '[[auth.users]]\nname = "app"\npassword_hash = "%(h)s"\ntags = []\n'
          'permissions = [{vhost = "/", configure = "^app\\\\.", write = "^app\\\\.", '
          'read = "^app\\\\."}]\n'
          '[[auth.users]]\nname = "ro"\npassword_hash = "%(h)s"\ntags = []\n'
          'permissions = [{vhost = "/", configure = "", write = "", read = ".*"}]\n'
          '[[auth.users]]\nname = "mon"\npassword_hash = "%(h)s"\ntags = ["monitoring"]\n'
          'permissions = []\n' % {"h": HASH})
REFUSED = "' in vhost '/' refused for user '%s'"


class PermissionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = Wharfd(WHARFD, CONFIG, extra_args=["--metrics-listen", "127.0.0.1:0"])
        # Made by guest (an administrator with every permission).
        conn = cls.connect_as("guest", "guest")
        ch = conn.channel()
        ch.queue_declare("other")
        ch.exchange_declare("other.x", "direct")
        ch.exchange_declare("app.x", "direct")
        ch.queue_declare("app.q")
        ch.queue_bind("app.q", "app.x", "k")
        conn.close()

    @classmethod
    def tearDownClass(cls):
        code = cls.broker.stop()
        if code != 0:
            print(cls.broker.read_log()[-20000:])
        shutil.rmtree(cls.broker.dir, ignore_errors=True)
        assert code == 0, code

    @classmethod
    def connect_as(cls, user, password="change-me"):
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", cls.broker.amqp_port, credentials=pika.PlainCredentials(user, password),
            connection_attempts=1))

    def setUp(self):
        self.conn = self.connect_as("app")

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()

    def assertRefused(self, action, text, code=403):
        """`action(channel)` closes that channel with `code` and `text`; the connection stays."""
        ch = self.conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            action(ch)
        self.assertEqual(closed.exception.reply_code, code)
        self.assertEqual(closed.exception.reply_text, text)
        self.assertTrue(self.conn.is_open)

    def access(self, what, user="app"):
        return "ACCESS_REFUSED - " + what + REFUSED % user

    def test_configure_is_declare_and_delete(self):
        ch = self.conn.channel()
        ch.queue_declare("app.mine", auto_delete=True)
        ch.exchange_declare("app.mine.x", "fanout", auto_delete=True)
        ch.queue_declare("other", passive=True)  # a passive declare checks nothing
        self.assertRefused(lambda ch: ch.queue_declare("mine"),
                           self.access("access to queue 'mine"))
        self.assertRefused(lambda ch: ch.exchange_declare("mine.x", "direct"),
                           self.access("access to exchange 'mine.x"))
        self.assertRefused(lambda ch: ch.queue_delete("other"),
                           self.access("access to queue 'other"))
        self.assertRefused(lambda ch: ch.exchange_delete("other.x"),
                           self.access("access to exchange 'other.x"))
        ch = self.conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            ch.queue_declare("")  # server-named: amq.gen-..., outside ^app\.
        self.assertEqual(closed.exception.reply_code, 403)
        self.assertRegex(closed.exception.reply_text,
                         r"^ACCESS_REFUSED - access to queue 'amq\.gen-[^']+' in vhost "
                         r"'/' refused for user 'app'$")

    def test_a_dead_letter_exchange_needs_write_on_it(self):
        self.assertRefused(
            lambda ch: ch.queue_declare("app.d", arguments={"x-dead-letter-exchange": "dlx"}),
            self.access("access to exchange 'dlx"))

    def test_write_is_publish_and_bind_into(self):
        ch = self.conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("app.x", "k", b"hello")
        self.assertRefused(
            lambda ch: (ch.confirm_delivery(), ch.basic_publish("", "app.q", b"x")),
            self.access("access to exchange 'amq.default"))
        self.assertRefused(
            lambda ch: (ch.confirm_delivery(), ch.basic_publish("other.x", "k", b"x")),
            self.access("access to exchange 'other.x"))
        self.assertRefused(lambda ch: ch.queue_bind("other", "app.x", "k"),
                           self.access("access to queue 'other"))
        self.assertRefused(lambda ch: ch.queue_bind("app.q", "other.x", "k"),
                           self.access("access to exchange 'other.x"))
        self.assertRefused(lambda ch: ch.exchange_bind("other.x", "app.x", "k"),
                           self.access("access to exchange 'other.x"))

    def test_read_is_consume_get_and_purge(self):
        ch = self.conn.channel()
        ch.basic_get("app.q", auto_ack=True)
        self.assertRefused(lambda ch: ch.basic_consume("other", lambda *a: None),
                           self.access("access to queue 'other"))
        self.assertRefused(lambda ch: ch.basic_get("other"),
                           self.access("access to queue 'other"))
        self.assertRefused(lambda ch: ch.queue_purge("other"),
                           self.access("access to queue 'other"))

    def test_a_read_only_user_consumes_and_cannot_publish(self):
        self.conn.close()
        self.conn = self.connect_as("ro")
        ch = self.conn.channel()
        ch.basic_consume("other", lambda *a: None)
        self.assertRefused(
            lambda ch: (ch.confirm_delivery(), ch.basic_publish("app.x", "k", b"x")),
            self.access("access to exchange 'app.x", "ro"))

    def test_the_user_id_property_must_be_the_login(self):
        ch = self.conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("app.x", "k", b"mine", pika.BasicProperties(user_id="app"))
        self.assertRefused(
            lambda ch: (ch.confirm_delivery(),
                        ch.basic_publish("app.x", "k", b"x", pika.BasicProperties(user_id="bob"))),
            "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was "
            "'app'", code=406)

    def test_no_permissions_in_the_vhost_is_refused_at_open(self):
        # pika reports a close during the handshake as a probable access denial.
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as closed:
            self.connect_as("mon")
        self.assertIn('(530) "NOT_ALLOWED - access to vhost \'/\' refused for user \'mon\'"',
                      str(closed.exception))

    def get_metrics(self, user, password="change-me"):
        request = urllib.request.Request(
            "http://127.0.0.1:%d/metrics" % self.broker.ports["metrics"],
            headers={"Authorization": "Basic " +
                     base64.b64encode(("%s:%s" % (user, password)).encode()).decode()})
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def test_metrics_need_the_monitoring_or_administrator_tag(self):
        self.assertEqual(self.get_metrics("mon")[0], 200)
        self.assertEqual(self.get_metrics("guest", "guest")[0], 200)
        status, body = self.get_metrics("app")
        self.assertEqual(status, 403)
        self.assertIn("user 'app' may not read metrics: it needs the tag monitoring or "
                      "administrator", body)

    def wharfctl(self, *args, check=True):
        result = subprocess.run(
            [WHARFCTL, "--server", "127.0.0.1:%d" % self.broker.ports["native"], *args],
            capture_output=True, text=True, timeout=30)
        if check:
            self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_wharfctl_manages_permissions_and_tags(self):
        self.wharfctl("add-user", "bob", "--new-password", "bob-secret")
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as closed:
            self.connect_as("bob", "bob-secret")
        self.assertIn("(530)", str(closed.exception), "a new user has no permissions")
        self.wharfctl("set-permissions", "bob", "^bob-.*", "^bob-.*", "")
        bob = self.connect_as("bob", "bob-secret")
        bob.channel().queue_declare("bob-q", auto_delete=True)
        listing = self.wharfctl("list-permissions").stdout
        self.assertRegex(listing, r"bob\s+/\s+\^bob-\.\*\s+\^bob-\.\*\s*\n")
        self.assertRegex(listing, r"app\s+/\s+\^app\\\.\s+\^app\\\.\s+\^app\\\.")
        self.assertIn("ro ", listing)
        self.assertNotRegex(listing, r"\nmon ", "mon has no permissions")
        one = self.wharfctl("list-permissions", "--user", "bob", "--json").stdout
        self.assertIn('"configure": "^bob-.*"', one)
        self.wharfctl("set-user-tags", "bob", "monitoring")
        self.assertRegex(self.wharfctl("users").stdout, r"bob\s+store\s+-\s+-\s+\[monitoring\]")
        self.assertEqual(self.get_metrics("bob", "bob-secret")[0], 200)
        refused = self.wharfctl("set-permissions", "app", ".*", ".*", ".*", check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("defined in the config file", refused.stderr)
        refused = self.wharfctl("--user", "bob", "--password", "bob-secret", "set-user-tags",
                                "bob", "administrator", check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("may not manage users: it needs the tag administrator", refused.stderr)
        self.wharfctl("clear-permissions", "bob")
        bob.close()
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError):
            self.connect_as("bob", "bob-secret")
        # Deleted, its open connections are closed, as RabbitMQ's delete_user does.
        self.wharfctl("set-permissions", "bob", ".*", ".*", ".*")
        bob = self.connect_as("bob", "bob-secret")
        self.wharfctl("delete-user", "bob")
        with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as closed:
            for _ in range(50):
                bob.process_data_events(time_limit=0.1)
        self.assertEqual(closed.exception.reply_code, 320)
        self.assertEqual(closed.exception.reply_text, "CONNECTION_FORCED - user 'bob' is deleted")
        self.assertTrue(self.conn.is_open)


if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    WHARFCTL = sys.argv.pop(1)
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
