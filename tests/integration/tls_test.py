#!/usr/bin/python3
"""AMQP 0-9-1 over TLS (AMQPS, [tls] amqp_listen; docs/security.md) with real clients from
Debian: pika 1.2 (python3-pika) through Python's ssl module, and openssl s_client for what the
listener offers (versions, certificate checks). Certificates are made for the run by
tests/integration/tls/make-certs.sh.

Run by ctest: tls_test.py WHARFD_PATH.
"""
import contextlib
import os
import shutil
import ssl
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import unittest

import pika

from wharfd_process import Wharfd

HERE = os.path.dirname(os.path.abspath(__file__))
WHARFD = None
CERTS = None


def config(extra=""):
    return ('[tls]\nlisten = "127.0.0.1:0"\namqp_listen = "127.0.0.1:0"\n'
            'cert = "%s/server.pem"\nkey = "%s/server.key"\n%s\n' % (CERTS, CERTS, extra))


def s_client(port, *args):
    """openssl s_client's output (stdout and stderr) for one connection to `port`."""
    run = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port,
                          "-CAfile", os.path.join(CERTS, "ca.pem"), "-verify_return_error",
                          *args], input=b"", capture_output=True, timeout=20)
    return (run.stdout + run.stderr).decode(errors="replace")


class AmqpsTest(unittest.TestCase):
    def setUp(self):
        self.broker = Wharfd(WHARFD, config())
        self.port = self.broker.ports["amqps"]

    def tearDown(self):
        code = self.broker.stop()
        if code != 0:
            print(self.broker.read_log()[-20000:])
        self.assertEqual(code, 0)
        shutil.rmtree(self.broker.dir, ignore_errors=True)

    def params(self, cafile="ca.pem", password="guest", **kwargs):
        context = ssl.create_default_context(cafile=os.path.join(CERTS, cafile))
        return pika.ConnectionParameters(
            "127.0.0.1", self.port, credentials=pika.PlainCredentials("guest", password),
            ssl_options=pika.SSLOptions(context, "localhost"), **kwargs)

    def test_pika_publishes_with_confirms_and_consumes_over_tls(self):
        conn = pika.BlockingConnection(self.params())
        ch = conn.channel()
        ch.queue_declare("secure", durable=True)
        ch.confirm_delivery()
        body = os.urandom(300000)  # spans TLS records and AMQP frames
        for i in range(20):
            ch.basic_publish("", "secure", body + bytes([i]),
                             pika.BasicProperties(delivery_mode=2, headers={"i": i}))
        got = []
        for method, props, payload in ch.consume("secure", inactivity_timeout=5):
            if method is None:
                break
            got.append((props.headers["i"], payload))
            ch.basic_ack(method.delivery_tag)
            if len(got) == 20:
                break
        ch.cancel()
        self.assertEqual([i for i, _ in got], list(range(20)))
        self.assertTrue(all(p == body + bytes([i]) for i, p in got))
        conn.close()
        self.assertIn("TLS: TLSv1.3", self.broker.read_log())

    def test_a_refused_login_is_closed_by_the_broker_over_tls_and_it_serves_on(self):
        # The broker closes this one (connection.close 403, then its own close_notify).
        with self.assertRaises(pika.exceptions.ProbableAuthenticationError):
            pika.BlockingConnection(self.params(password="wrong", connection_attempts=1))
        # A CA that did not sign the broker's certificate: the client's check fails.
        with self.assertRaises(ssl.SSLCertVerificationError):
            pika.BlockingConnection(self.params(cafile="other-ca.pem", connection_attempts=1))
        conn = pika.BlockingConnection(self.params())
        self.assertTrue(conn.is_open)
        conn.close()
        log = self.broker.read_log()
        self.assertIn("TLS handshake failed", log)
        self.assertIn("login refused", log)

    def test_s_client_sees_the_certificate_chain_and_tls_1_2_or_1_3_only(self):
        out = s_client(self.port)
        self.assertIn("New, TLSv1.3, Cipher is TLS_", out)
        self.assertIn("Verify return code: 0 (ok)", out)
        self.assertIn("issuer=CN = Wharf Test CA", out)
        out = s_client(self.port, "-tls1_2")
        self.assertIn("New, TLSv1.2, Cipher is ECDHE-", out)
        self.assertIn("Verify return code: 0 (ok)", out)
        # TLS 1.1 and below are never offered (Debian's OpenSSL refuses them on its side too,
        # so ask at security level 0 to be sure it is the broker that says no).
        out = s_client(self.port, "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
        self.assertIn("alert protocol version", out)
        self.assertIn("Cipher is (NONE)", out)
        # The native TLS listener has the same certificate.
        out = s_client(self.broker.ports["tls"])
        self.assertIn("New, TLSv1.3, Cipher is TLS_", out)


ALICE = ('[[auth.users]]\nname = "alice"\npassword_hash = "pbkdf2-sha256$20000$'
         'e3fa77b999ab7bd3855a8760414e6e90$'
         '7746c2f4b069aeaf971bbae63e7a3c76b5c4694c1bbe1df14c7d616e6980c4d9"\n')


@contextlib.contextmanager
def broker_with(extra, test):
    """A wharfd with config(extra) for one test; it must stop cleanly."""
    broker = Wharfd(WHARFD, config(extra))
    try:
        yield broker
    finally:
        test.assertEqual(broker.stop(), 0)
        shutil.rmtree(broker.dir, ignore_errors=True)


def external(port, with_certificate=True):
    """pika's EXTERNAL login over TLS, with alice's client certificate or none."""
    context = ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))
    if with_certificate:
        context.load_cert_chain(os.path.join(CERTS, "client.pem"),
                                os.path.join(CERTS, "client.key"))
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.credentials.ExternalCredentials(),
        ssl_options=pika.SSLOptions(context, "localhost"), connection_attempts=1))


class ExternalTest(unittest.TestCase):
    """SASL EXTERNAL: the user is the one the verified client certificate names, as with
    RabbitMQ's rabbitmq_auth_mechanism_ssl and ssl_cert_login_from = common_name."""

    def test_pika_logs_in_with_its_client_certificate(self):
        extra = 'verify = "required"\nca = "%s/ca.pem"\ncert_login = "common_name"\n' % CERTS
        with broker_with(extra + ALICE, self) as broker:
            conn = external(broker.ports["amqps"])
            ch = conn.channel()
            ch.queue_declare("by-cert")
            ch.basic_publish("", "by-cert", b"signed")
            self.assertEqual(ch.basic_get("by-cert", auto_ack=True)[2], b"signed")
            conn.close()
            self.assertIn('user="alice" connection opened', broker.read_log())
            # Without a client certificate the handshake itself refuses (verify = required).
            with self.assertRaises((pika.exceptions.AMQPConnectionError, ssl.SSLError)):
                external(broker.ports["amqps"], with_certificate=False)

    def test_external_is_not_offered_without_cert_login(self):
        with broker_with('verify = "optional"\nca = "%s/ca.pem"\n' % CERTS, self) as broker:
            # pika finds no EXTERNAL among the broker's mechanisms.
            with self.assertRaises(pika.exceptions.AuthenticationError):
                external(broker.ports["amqps"])


class MinVersionTest(unittest.TestCase):
    def test_min_version_1_3_refuses_tls_1_2(self):
        with broker_with('min_version = "1.3"\nmetrics_listen = "127.0.0.1:0"', self) as broker:
            for name in ("amqps", "https"):  # the HTTPS metrics listener follows [tls] too
                port = broker.ports[name]
                self.assertIn("New, TLSv1.3, Cipher is TLS_", s_client(port), name)
                self.assertIn("alert protocol version", s_client(port, "-tls1_2"), name)

    def test_the_cipher_lists_hold_on_every_tls_listener(self):
        extra = ('ciphers = "ECDHE-RSA-AES256-GCM-SHA384"\n'
                 'ciphersuites = "TLS_CHACHA20_POLY1305_SHA256"\nmetrics_listen = "127.0.0.1:0"')
        with broker_with(extra, self) as broker:
            for name in ("amqps", "tls", "https"):
                port = broker.ports[name]
                self.assertIn("Cipher is TLS_CHACHA20_POLY1305_SHA256", s_client(port), name)
                self.assertIn("Cipher is ECDHE-RSA-AES256-GCM-SHA384",
                              s_client(port, "-tls1_2"), name)
                self.assertIn("Cipher is (NONE)",
                              s_client(port, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"),
                              name)


if __name__ == "__main__":
    WHARFD = sys.argv.pop(1)
    CERTS = tempfile.mkdtemp(prefix="wharf-tls-certs-")
    subprocess.run([os.path.join(HERE, "tls", "make-certs.sh"), CERTS], check=True)
    try:
        result = unittest.main(exit=False, verbosity=2).result
    finally:
        shutil.rmtree(CERTS, ignore_errors=True)
    sys.exit(0 if result.wasSuccessful() else 1)
