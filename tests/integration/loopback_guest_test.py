#!/usr/bin/python3
"""The built-in guest logs in from loopback addresses only (issue 18, "Exposure"; docs/security.md),
proven from a real address that is not loopback: the test makes a network namespace joined to
this one by a veth pair (Debian's iproute2; a /30 in 10.231.0.0/16 that never leaves this
machine), wharfd listens on the host end's address only, and the clients run inside the
namespace (`ip netns exec`): pika over AMQP, wharfctl over the native protocol, and Python's
urllib against the metrics listener with [server] metrics_auth. A configured user gets in from
there; guest is refused by each, with RabbitMQ's words over AMQP.

Needs root (CAP_NET_ADMIN) for the namespace, as `make test` runs in CI; elsewhere it says why
and exits 77, which ctest shows as a skipped test.

Run by ctest: loopback_guest_test.py WHARFD_PATH WHARFCTL_PATH.
"""
import os
import shutil
import subprocess
import sys
import textwrap

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import unittest

from wharfd_process import Wharfd

WHARFD = None
WHARFCTL = None

# alice / change-me, the example user of config/wharfd.toml. No failed-login throttle: each
# refusal of guest would slow the next login from the namespace's one address (the throttle has
# tests of its own).
CONFIG = ('[server]\nmetrics_auth = true\n[auth]\nfailure_delay_ms = 0\n'
          '[[auth.users]]\nname = "alice"\n'
          'password_hash = "pbkdf2-sha256$20000$e3fa77b999ab7bd3855a8760414e6e90$'
          '7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9"\n')

# Run inside the namespace: one AMQP login or one HTTP GET, and what came of it on stdout.
CLIENT = textwrap.dedent('''
    import base64, sys, urllib.error, urllib.request
    kind, host, port, user, password = sys.argv[1:6]
    if kind == "amqp":
        import pika
        try:
            conn = pika.BlockingConnection(pika.ConnectionParameters(
                host, int(port), credentials=pika.PlainCredentials(user, password),
                connection_attempts=1, socket_timeout=10))
            ch = conn.channel()
            ch.queue_declare("from-afar")
            ch.basic_publish("", "from-afar", b"hello")
            print("ok", ch.basic_get("from-afar", auto_ack=True)[2].decode())
            conn.close()
        except pika.exceptions.AMQPError as e:
            print("refused", type(e).__name__, repr(e))
    else:
        request = urllib.request.Request("http://%s:%s/metrics" % (host, port))
        token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        request.add_header("Authorization", "Basic " + token)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                print(response.status, response.read(200).decode(errors="replace"))
        except urllib.error.HTTPError as e:
            print(e.code, e.read().decode(errors="replace"))
''')


def run(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, check=check)


class Namespace:
    """A network namespace and a veth pair into it: this side HOST, the namespace's PEER."""

    def __init__(self):
        tag = os.getpid() % 100000
        self.name = "wharf-guest-%d" % tag
        self.outer, inner = "wg%da" % tag, "wg%db" % tag
        subnet = "10.231.%d.%d" % (tag // 64 % 256, tag % 64 * 4)
        prefix = subnet.rsplit(".", 1)[0] + "."
        last = int(subnet.rsplit(".", 1)[1])
        self.host, self.peer = prefix + str(last + 1), prefix + str(last + 2)
        run("ip", "netns", "add", self.name)
        try:
            run("ip", "link", "add", self.outer, "type", "veth", "peer", "name", inner)
            run("ip", "link", "set", inner, "netns", self.name)
            run("ip", "addr", "add", self.host + "/30", "dev", self.outer)
            run("ip", "link", "set", self.outer, "up")
            self.exec("ip", "addr", "add", self.peer + "/30", "dev", inner)
            self.exec("ip", "link", "set", inner, "up")
            self.exec("ip", "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def exec(self, *args, env=None, check=True):
        command = ["ip", "netns", "exec", self.name]
        if env:
            command += ["env", *("%s=%s" % kv for kv in env.items())]
        return run(*command, *args, check=check)

    def close(self):
        run("ip", "link", "del", self.outer, check=False)  # takes its peer along
        run("ip", "netns", "del", self.name, check=False)


def namespaces_missing():
    """Why this machine cannot make a namespace for the test; "" when it can."""
    if os.geteuid() != 0:
        return "needs root for ip netns (CAP_NET_ADMIN)"
    if shutil.which("ip") is None:
        return "needs ip (iproute2)"
    probe = run("ip", "netns", "add", "wharf-probe-%d" % os.getpid(), check=False)
    if probe.returncode != 0:
        return "ip netns add failed: " + probe.stderr.strip()
    run("ip", "netns", "del", "wharf-probe-%d" % os.getpid(), check=False)
    return ""


class LoopbackGuestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ns = Namespace()
        cls.broker = Wharfd(WHARFD, CONFIG, host=cls.ns.host,
                            extra_args=["--metrics-listen", cls.ns.host + ":0"])

    @classmethod
    def tearDownClass(cls):
        code = cls.broker.stop()
        log = cls.broker.read_log()
        shutil.rmtree(cls.broker.dir, ignore_errors=True)
        cls.ns.close()
        if code != 0:
            print(log[-20000:])
        assert code == 0, "wharfd did not stop cleanly"

    def client(self, kind, port, user, password):
        out = self.ns.exec("/usr/bin/python3", "-c", CLIENT, kind, self.ns.host, str(port), user,
                           password)
        return out.stdout.strip()

    def test_the_broker_warns_that_guest_is_on_beyond_loopback(self):
        self.assertIn("beyond loopback with the built-in admin guest/guest enabled",
                      self.broker.read_log())

    def test_amqp_refuses_guest_from_afar_and_takes_a_configured_user(self):
        port = self.broker.ports["amqp"]
        refused = self.client("amqp", port, "guest", "guest")
        # RabbitMQ's answer, word for word; the reason is in the broker's log only.
        self.assertTrue(refused.startswith("refused"), refused)
        self.assertIn("(403) 'ACCESS_REFUSED - Login was refused using authentication mechanism "
                      "PLAIN. For details see the broker logfile.'", refused)
        self.assertIn("may only connect from a loopback address", self.broker.read_log())
        self.assertEqual(self.client("amqp", port, "alice", "change-me"), "ok hello")

    def test_wharfctl_is_refused_as_guest_from_afar_and_works_as_a_configured_user(self):
        server = "%s:%d" % (self.ns.host, self.broker.ports["native"])
        guest = self.ns.exec(WHARFCTL, "--server", server, "queues", check=False)
        self.assertNotEqual(guest.returncode, 0, guest.stdout)
        self.assertIn("may only connect from a loopback address", guest.stderr)
        alice = self.ns.exec(WHARFCTL, "--server", server, "--user", "alice", "queues",
                             env={"WHARF_PASSWORD": "change-me"}, check=False)
        self.assertEqual(alice.returncode, 0, alice.stderr)

    def test_metrics_refuse_guest_from_afar_with_403_and_serve_a_configured_user(self):
        port = self.broker.ports["metrics"]
        self.assertEqual(self.client("http", port, "guest", "guest"),
                         "403 user 'guest' may only connect from a loopback address")
        served = self.client("http", port, "alice", "change-me")
        self.assertTrue(served.startswith("200 # HELP"), served)


if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    WHARFCTL = sys.argv.pop(1)
    missing = namespaces_missing()
    if missing:
        print("skipped: " + missing)
        sys.exit(77)
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
