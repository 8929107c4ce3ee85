#!/usr/bin/python3
"""Bad AMQP 0-9-1 input against the real wharfd, spoken as raw frames (standard library only):
every case must get RabbitMQ's answer (the reply codes, texts and class/method ids below were
recorded from RabbitMQ 3.10.8, Debian's rabbitmq-server), and none may take the broker down:
afterwards a good client still works, 200 connections sending random bytes after the handshake
are all closed (or time out) without the broker growing, and wharfd exits 0 on SIGTERM with no
sanitizer report in its log.

    amqp_bad_input_test.py WHARFD_PATH      starts wharfd (free loopback ports, temp data dir)
    amqp_bad_input_test.py --port PORT      runs the same cases against a broker already
                                            listening on 127.0.0.1:PORT (e.g. RabbitMQ);
                                            AMQP_BAD_INPUT_PORT=PORT does the same

The max-message-size case expects a limit of 16 MiB (Wharf's default); against RabbitMQ set
`max_message_size = 16777216` in rabbitmq.conf (or AMQP_BAD_INPUT_MAX_MESSAGE=BYTES here).
"""
import os
import random
import re
import shutil
import socket
import struct
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import threading
import time
import unittest

BROKER = None  # a wharfd_process.Wharfd, or None when running against --port
BROKER_PATH = None  # its binary
PORT = None
MAX_MESSAGE = int(os.environ.get("AMQP_BAD_INPUT_MAX_MESSAGE", 16 << 20))

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE
TIMEOUT = 5.0

# --- Encoding ----------------------------------------------------------------------------------


def shortstr(s):
    if isinstance(s, str):
        s = s.encode()
    return struct.pack(">B", len(s)) + s


def longstr(s):
    if isinstance(s, str):
        s = s.encode()
    return struct.pack(">I", len(s)) + s


EMPTY_TABLE = b"\x00\x00\x00\x00"


def frame(ftype, channel, payload, end=FRAME_END):
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + bytes([end])


def method_payload(class_id, method_id, args=b""):
    return struct.pack(">HH", class_id, method_id) + args


def method(channel, class_id, method_id, args=b""):
    return frame(FRAME_METHOD, channel, method_payload(class_id, method_id, args))


def start_ok(user=b"guest", password=b"guest"):
    return method(0, 10, 11, EMPTY_TABLE + shortstr("PLAIN") +
                  longstr(b"\x00" + user + b"\x00" + password) + shortstr("en_US"))


def tune_ok(channel_max, frame_max, heartbeat=0):
    return method(0, 10, 31, struct.pack(">HIH", channel_max, frame_max, heartbeat))


def connection_open(vhost="/"):
    return method(0, 10, 40, shortstr(vhost) + shortstr("") + b"\x00")


def connection_close_ok():
    return method(0, 10, 51)


def channel_open(channel):
    return method(channel, 20, 10, shortstr(""))


def channel_close_ok(channel):
    return method(channel, 20, 41)


def queue_declare_args(name, exclusive=True):
    bits = 0x04 if exclusive else 0  # passive, durable, exclusive, auto-delete, no-wait
    return struct.pack(">H", 0) + shortstr(name) + bytes([bits]) + EMPTY_TABLE


def queue_declare(channel, name="", exclusive=True):
    return method(channel, 50, 10, queue_declare_args(name, exclusive))


def basic_publish(channel, exchange="", routing_key="", mandatory=False):
    return method(channel, 60, 40, struct.pack(">H", 0) + shortstr(exchange) +
                  shortstr(routing_key) + bytes([1 if mandatory else 0]))


def content_header(channel, body_size, class_id=60):
    # class, weight, body size, property flags (no properties)
    return frame(FRAME_HEADER, channel, struct.pack(">HHQH", class_id, 0, body_size, 0))


def body(channel, data):
    return frame(FRAME_BODY, channel, data)


def heartbeat(channel=0):
    return frame(FRAME_HEARTBEAT, channel, b"")


# --- Decoding ----------------------------------------------------------------------------------


class Closed(Exception):
    """The broker closed the socket (EOF or reset)."""


class Close:
    """A decoded connection.close or channel.close."""

    def __init__(self, channel, payload):
        self.channel = channel
        self.class_id, self.method_id = struct.unpack(">HH", payload[:4])
        self.reply_code, = struct.unpack(">H", payload[4:6])
        n = payload[6]
        self.reply_text = payload[7:7 + n].decode("utf-8", "replace")
        self.failed_class, self.failed_method = struct.unpack(">HH", payload[7 + n:11 + n])

    def __repr__(self):
        kind = "connection.close" if self.class_id == 10 else "channel.close"
        return "%s(ch=%d, %d, %r, %d/%d)" % (kind, self.channel, self.reply_code, self.reply_text,
                                             self.failed_class, self.failed_method)


class Conn:
    """A raw AMQP socket to 127.0.0.1:PORT."""

    def __init__(self, port=None, timeout=TIMEOUT):
        self.sock = socket.create_connection(("127.0.0.1", port or PORT), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.channel_max = self.frame_max = None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def fill(self, n):
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError) as e:
                raise Closed("reset: %s" % e)
            if not chunk:
                raise Closed("EOF with %d bytes pending: %r" % (len(self.buf), self.buf[:64]))
            self.buf += chunk

    def read_exact(self, n):
        self.fill(n)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_frame(self):
        """(type, channel, payload); heartbeats included."""
        ftype, channel, size = struct.unpack(">BHI", self.read_exact(7))
        payload = self.read_exact(size)
        end = self.read_exact(1)[0]
        if end != FRAME_END:
            raise AssertionError("broker sent frame end 0x%02x" % end)
        return ftype, channel, payload

    def read_method(self):
        """The next method frame: (channel, class, method, payload), heartbeats skipped."""
        while True:
            ftype, channel, payload = self.read_frame()
            if ftype == FRAME_METHOD:
                cls, mth = struct.unpack(">HH", payload[:4])
                return channel, cls, mth, payload

    def expect(self, want_cls, want_mth, channel=None):
        ch, cls, mth, payload = self.read_method()
        if (cls, mth) in ((10, 50), (20, 40)):
            raise AssertionError("expected %d.%d, got %r" % (want_cls, want_mth,
                                                               Close(ch, payload)))
        if (cls, mth) != (want_cls, want_mth) or (channel is not None and ch != channel):
            raise AssertionError("expected %d.%d on %s, got %d.%d on %d" % (
                want_cls, want_mth, channel, cls, mth, ch))
        return payload

    def read_close(self):
        """The next connection.close or channel.close (other methods before it are skipped)."""
        while True:
            ch, cls, mth, payload = self.read_method()
            if (cls, mth) in ((10, 50), (20, 40)):
                return Close(ch, payload)

    def wait_closed(self, timeout=TIMEOUT):
        """True when the broker closes the socket (EOF or reset) within timeout; whatever it
        sends before is skipped."""
        self.sock.settimeout(timeout)
        deadline = time.time() + timeout
        try:
            while time.time() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return False

    def handshake(self, open_vhost=True, channel_max=None, frame_max=None):
        self.send(PROTOCOL_HEADER)
        self.expect(10, 10)  # connection.start
        self.send(start_ok())
        payload = self.expect(10, 30)  # connection.tune
        self.channel_max, self.frame_max, _ = struct.unpack(">HIH", payload[4:12])
        if channel_max is not None:
            self.channel_max = channel_max
        if frame_max is not None:
            self.frame_max = frame_max
        self.send(tune_ok(self.channel_max, self.frame_max, 0))
        if open_vhost:
            self.send(connection_open())
            self.expect(10, 41)  # connection.open-ok
        return self

    def open_channel(self, channel):
        self.send(channel_open(channel))
        self.expect(20, 11, channel)


def connect(**kw):
    return Conn().handshake(**kw)


# --- Cases -------------------------------------------------------------------------------------


class T1ProtocolHeaderTest(unittest.TestCase):
    """Anything but AMQP 0-9-1's header is answered with that header, then the socket closes."""

    def refused(self, header):
        c = Conn()
        try:
            c.send(header)
            got = b""
            c.sock.settimeout(TIMEOUT)
            try:
                while len(got) < 8:
                    chunk = c.sock.recv(64)
                    if not chunk:
                        break
                    got += chunk
            except ConnectionResetError:
                pass
            self.assertEqual(got, PROTOCOL_HEADER, header)
            self.assertTrue(c.wait_closed(), "socket still open after %r" % header)
        finally:
            c.close()

    def test_garbage(self):
        self.refused(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")

    def test_amqp_0_9_0(self):
        self.refused(b"AMQP\x00\x00\x09\x00")

    def test_amqp_1_0(self):
        self.refused(b"AMQP\x00\x01\x00\x00")

    def test_amqp_1_0_sasl(self):
        self.refused(b"AMQP\x03\x01\x00\x00")

    def test_amqp_0_9_header_is_taken_as_0_9_1(self):
        # RabbitMQ: "AMQP 1 1 0 9" (0-9's header) starts a 0-9-1 connection (0-8's headers,
        # "AMQP 1 1 8 0" and "AMQP 1 1 9 1", start a 0-8 one: not checked here).
        c = Conn()
        try:
            c.send(b"AMQP\x01\x01\x00\x09")
            c.fill(8)
            self.assertNotEqual(c.buf[:8], PROTOCOL_HEADER,
                                "AMQP 1 1 0 9 was refused with the 0-9-1 protocol header")
            payload = c.expect(10, 10)
            self.assertEqual(payload[4:6], b"\x00\x09")  # version 0-9
            c.send(start_ok())
            c.expect(10, 30)
        finally:
            c.close()


class T2BadFramesTest(unittest.TestCase):
    """Each case on a fresh connection, after the full handshake unless it says otherwise. The
    expected values are RabbitMQ 3.10.8's answers to the same bytes. A case checks everything
    (code, text, ids, then that the connection ends or keeps working) before it fails, so that
    one run shows every difference."""

    def setUp(self):
        self.c = None
        self.problems = []

    def tearDown(self):
        if self.c is not None:
            self.c.close()

    def conn(self, **kw):
        self.c = connect(**kw)
        return self.c

    def check(self, what, got, want):
        if want is not None and got != want:
            self.problems.append("%s: got %r, RabbitMQ %r" % (what, got, want))

    def done(self):
        if self.problems:
            self.fail("\n  " + "\n  ".join(self.problems))

    def read_close(self, c):
        try:
            return c.read_close()
        except Closed as e:
            self.problems.append("no connection.close or channel.close: the socket closed (%s)"
                                 % e)
        except socket.timeout:
            self.problems.append("no answer within %.0f s" % TIMEOUT)
        self.done()

    def hard(self, c, code, text, class_id, method_id):
        """A connection.close with these values (None: not checked); then close-ok, and the
        broker closes the socket."""
        close = self.read_close(c)
        self.check("close", (close.channel, close.class_id, close.method_id), (0, 10, 50))
        self.check("reply code", close.reply_code, code)
        self.check("reply text", close.reply_text, text)
        self.check("class/method", (close.failed_class, close.failed_method),
                   None if class_id is None else (class_id, method_id))
        if close.class_id == 10:
            try:
                c.send(connection_close_ok())
            except (BrokenPipeError, ConnectionResetError):
                pass
            if not c.wait_closed():
                self.problems.append("the socket is still open %.0f s after close-ok" % TIMEOUT)
        self.done()
        return close

    def soft(self, c, channel, code, text, class_id, method_id):
        """A channel.close with these values; then close-ok, and the connection still works:
        another channel declares a queue, and the closed number can be opened again."""
        close = self.read_close(c)
        self.check("close", (close.channel, close.class_id, close.method_id), (channel, 20, 40))
        self.check("reply code", close.reply_code, code)
        self.check("reply text", close.reply_text, text)
        self.check("class/method", (close.failed_class, close.failed_method),
                   (class_id, method_id))
        if close.class_id == 20:
            c.send(channel_close_ok(channel))
            other = channel + 1
            c.open_channel(other)
            c.send(queue_declare(other, ""))
            payload = c.expect(50, 11, other)
            self.assertTrue(payload[5:5 + payload[4]].startswith(b"amq.gen-"), payload)
            c.open_channel(channel)
        self.done()
        return close

    def ends(self, c):
        """The broker ends the connection (whatever it sends first)."""
        try:
            while True:
                ch, cls, mth, payload = c.read_method()
                if (cls, mth) == (10, 50):
                    print("\n  (got %r)" % Close(ch, payload), file=sys.stderr)
                    c.send(connection_close_ok())
                    break
        except (Closed, BrokenPipeError, ConnectionResetError):
            return
        except socket.timeout:
            self.fail("the connection did not end within %.0f s" % TIMEOUT)
        self.assertTrue(c.wait_closed(), "the socket is still open after close-ok")

    # -- Frames ---------------------------------------------------------------------------------

    def test_frame_larger_than_frame_max(self):
        c = self.conn()
        # Only the frame's header and a few octets: the broker refuses on the declared size,
        # without waiting for (or buffering) the rest. RabbitMQ allows a payload of up to
        # frame_max (a "fudge" of the 8 octets of frame overhead); frame_max + 1 is over.
        size = c.frame_max + 1
        c.send(struct.pack(">BHI", FRAME_METHOD, 1, size) + b"\x00" * 16)
        self.hard(c, 501, "FRAME_ERROR - type 1, all octets = <<>>: {frame_too_large,%d,%d}" %
                  (size, c.frame_max - 8), 0, 0)

    def test_frame_of_frame_max_plus_8_octets_is_accepted(self):
        # RabbitMQ: the check is payload > frame_max - 8 + 8 (FRAME_SIZE_FUDGE), so a frame of
        # frame_max + 8 octets in all is taken (clients that cut bodies at frame_max exist).
        c = self.conn()
        c.open_channel(1)
        base = method_payload(50, 10, struct.pack(">H", 0) + shortstr("") + b"\x04")
        pad = c.frame_max - len(base) - 4 - 7  # table size, "p" key, type octet, longstr size
        table = shortstr("p") + b"S" + longstr(b"x" * pad)
        payload = base + struct.pack(">I", len(table)) + table
        self.assertEqual(len(payload), c.frame_max)
        c.send(frame(FRAME_METHOD, 1, payload))
        try:
            c.expect(50, 11, 1)
        except (AssertionError, Closed) as e:
            self.fail("a frame of frame_max + 8 octets was refused: %s" % e)

    def test_bad_frame_end(self):
        c = self.conn()
        payload = method_payload(20, 10, shortstr(""))
        c.send(frame(FRAME_METHOD, 1, payload, end=0x00))
        self.hard(c, 501, "FRAME_ERROR - type 1, all octets = <<0,20,0,10,0>>: "
                  "{invalid_frame_end_marker,0}", 0, 0)

    def test_unknown_frame_type(self):
        c = self.conn()
        c.send(frame(9, 0, b"\x01\x02"))
        self.hard(c, 501, "FRAME_ERROR - type 9, all octets = <<1,2>>: unknown_frame", 0, 0)

    def test_heartbeat_with_a_payload(self):
        c = self.conn()
        c.send(frame(FRAME_HEARTBEAT, 0, b"x"))
        self.hard(c, 501, 'FRAME_ERROR - type 8, all octets = <<"x">>: unknown_frame', 0, 0)

    def test_heartbeat_on_channel_1(self):
        c = self.conn()
        c.open_channel(1)
        c.send(heartbeat(1))
        self.hard(c, 505, "UNEXPECTED_FRAME - type 8, all octets = <<>>", 0, 0)

    def test_method_frame_too_short_for_its_ids(self):
        c = self.conn()
        c.open_channel(1)
        c.send(frame(FRAME_METHOD, 1, b"\x00\x32"))
        self.hard(c, 501, "FRAME_ERROR - type 1, all octets = <<0,50>>: unknown_frame", 0, 0)

    # -- Channels -------------------------------------------------------------------------------

    def test_method_on_a_channel_never_opened(self):
        c = self.conn()
        c.send(queue_declare(5, "q"))
        self.hard(c, 504, "CHANNEL_ERROR - expected 'channel.open'", 50, 10)

    def test_channel_open_twice(self):
        c = self.conn()
        c.open_channel(1)
        c.send(channel_open(1))
        self.hard(c, 504, "CHANNEL_ERROR - second 'channel.open' seen", 20, 10)

    def test_channel_method_on_channel_0(self):
        c = self.conn()
        c.send(queue_declare(0, ""))
        self.hard(c, 504, "CHANNEL_ERROR - unexpected method in connection state running", 50,
                  10)

    def test_channel_number_above_channel_max_is_accepted(self):
        # RabbitMQ 3.10 limits how many channels are open, not their numbers: with
        # channel_max 10, channel 11 (and 65535) open.
        c = self.conn(channel_max=10)
        for n in (11, 65535):
            c.send(channel_open(n))
            try:
                c.expect(20, 11, n)
            except (AssertionError, Closed) as e:
                self.fail("channel.open on channel %d (channel_max 10): %s" % (n, e))

    def test_more_channels_than_channel_max(self):
        c = self.conn(channel_max=2)
        c.open_channel(1)
        c.open_channel(2)
        c.send(channel_open(3))
        self.hard(c, 530, "NOT_ALLOWED - number of channels opened (2) has reached the "
                  "negotiated channel_max (2)", 0, 0)

    # -- Content --------------------------------------------------------------------------------

    def test_content_header_without_publish(self):
        c = self.conn()
        c.open_channel(1)
        c.send(content_header(1, 3))
        self.hard(c, 505, "UNEXPECTED_FRAME - expected method frame, got non method frame "
                  "instead", 0, 0)

    def test_content_header_on_channel_0(self):
        c = self.conn()
        c.send(content_header(0, 3))
        self.hard(c, 505, "UNEXPECTED_FRAME - type 2, all octets = "
                  "<<0,60,0,0,0,0,0,0,0,0,0,3,0,0>>", 0, 0)

    def test_content_header_of_another_class(self):
        c = self.conn()
        c.open_channel(1)
        c.send(basic_publish(1, "", "q") + content_header(1, 3, class_id=50))
        self.hard(c, 505, "UNEXPECTED_FRAME - expected content header for class 60, got one "
                  "for class 50 instead", 60, 40)

    def test_method_instead_of_content_header(self):
        c = self.conn()
        c.open_channel(1)
        c.send(basic_publish(1, "", "q") + queue_declare(1, ""))
        self.hard(c, 505, "UNEXPECTED_FRAME - expected content header for class 60, got non "
                  "content header frame instead", 60, 40)

    def test_body_without_header(self):
        c = self.conn()
        c.open_channel(1)
        c.send(basic_publish(1, "", "q") + body(1, b"abc"))
        self.hard(c, 505, "UNEXPECTED_FRAME - expected content header for class 60, got non "
                  "content header frame instead", 60, 40)

    def test_body_without_publish(self):
        c = self.conn()
        c.open_channel(1)
        c.send(body(1, b"abc"))
        self.hard(c, 505, "UNEXPECTED_FRAME - expected method frame, got non method frame "
                  "instead", 0, 0)

    def test_body_on_channel_0(self):
        c = self.conn()
        c.send(body(0, b"abc"))
        self.hard(c, 505, 'UNEXPECTED_FRAME - type 3, all octets = <<"abc">>', 0, 0)

    def test_body_longer_than_body_size(self):
        # RabbitMQ 3.10 takes the longer body silently and keeps waiting for content (the
        # remaining size went negative); the next method frame is the error.
        c = self.conn()
        c.open_channel(1)
        c.send(basic_publish(1, "", "q") + content_header(1, 3) + body(1, b"abcdef") +
               queue_declare(1, ""))
        self.hard(c, 505, "UNEXPECTED_FRAME - expected content body, got non content body "
                  "frame instead", 60, 40)

    def test_message_larger_than_max_message_size(self):
        c = self.conn()
        c.open_channel(1)
        size = MAX_MESSAGE + 1
        chunk = c.frame_max - 8
        data = [basic_publish(1, "", "no-such-queue"), content_header(1, size)]
        left = size
        zeros = b"\x00" * chunk
        while left:
            n = min(chunk, left)
            data.append(body(1, zeros[:n]))
            left -= n
        c.send(b"".join(data))
        self.soft(c, 1, 406, "PRECONDITION_FAILED - message size %d is larger than configured "
                  "max size %d" % (size, MAX_MESSAGE), 60, 40)

    # -- Methods --------------------------------------------------------------------------------

    def test_unknown_method_on_channel_0(self):
        # RabbitMQ 3.10.8 has no reply code for this: its reader crashes
        # ({unknown_method_id,{10,99}}) and the socket is closed without a connection.close.
        # What is checked: the broker ends the connection (and stays up).
        c = self.conn()
        c.send(method(0, 10, 99))
        self.ends(c)

    def test_unknown_class_on_an_open_channel(self):
        c = self.conn()  # as above: RabbitMQ drops the connection without a reply code
        c.open_channel(1)
        c.send(method(1, 99, 1, b"\x00\x00"))
        self.ends(c)

    def test_server_method_from_the_client(self):
        c = self.conn()
        c.open_channel(1)
        c.send(method(1, 20, 11, longstr(b"")))  # channel.open-ok
        self.hard(c, 503, "COMMAND_INVALID - unimplemented method", 20, 11)

    def test_unsolicited_connection_close_ok(self):
        c = self.conn()
        c.send(connection_close_ok())
        self.hard(c, 504, "CHANNEL_ERROR - unexpected method in connection state running", 10,
                  51)

    def test_truncated_method_payload(self):
        c = self.conn()
        c.open_channel(1)
        args = queue_declare_args("q")[:-3]  # the arguments table's size cut short
        c.send(method(1, 50, 10, args))
        self.hard(c, 501, "FRAME_ERROR - cannot decode <<0,0,1,113,4,0>>", 50, 10)

    def test_method_payload_with_trailing_octets(self):
        c = self.conn()
        c.open_channel(1)
        c.send(method(1, 50, 10, queue_declare_args("q") + b"\x00"))
        self.hard(c, 501, "FRAME_ERROR - cannot decode <<0,0,1,113,4,0,0,0,0,0>>", 50, 10)

    def test_channel_open_before_connection_open(self):
        c = self.conn(open_vhost=False)
        c.send(channel_open(1))
        self.hard(c, 505, "UNEXPECTED_FRAME - type 1, all octets = <<0,20,0,10,0>>", 0, 0)

    def test_other_connection_method_before_connection_open(self):
        c = self.conn(open_vhost=False)
        c.send(tune_ok(c.channel_max, c.frame_max))
        self.hard(c, 504, "CHANNEL_ERROR - unexpected method in connection state opening", 10,
                  31)

    def test_channel_open_before_tune_ok(self):
        # A deliberate difference (docs/amqp.md): RabbitMQ answers an error before the tuning
        # is done with silence (the socket closes after SILENT_CLOSE_DELAY, 3 s); Wharf says
        # what it expected, with connection.close 503, then closes.
        c = Conn()
        self.c = c
        c.send(PROTOCOL_HEADER)
        c.expect(10, 10)
        c.send(start_ok())
        c.expect(10, 30)
        c.send(channel_open(1))
        self.hard(c, 503, "COMMAND_INVALID - expected 'connection.tune-ok'", 0, 0)

    def test_vhost_with_invalid_utf8(self):
        c = self.conn(open_vhost=False)
        c.send(connection_open(b"\xff"))
        self.hard(c, 501, "FRAME_ERROR - Malformed UTF-8 in shortstr", 10, 40)

    def test_content_header_with_malformed_properties(self):
        # content-type announced, not there. A deliberate difference (docs/amqp.md): RabbitMQ
        # decodes the properties in the channel and the channel process crashes (541
        # INTERNAL_ERROR for the connection); Wharf names the fault, 502 SYNTAX_ERROR, blaming
        # the publish.
        c = self.conn()
        c.open_channel(1)
        c.send(basic_publish(1, "", "q") +
               frame(FRAME_HEADER, 1, struct.pack(">HHQH", 60, 0, 0, 0x8000)))
        close = self.hard(c, 502, None, 60, 40)
        self.assertTrue(close.reply_text.startswith("SYNTAX_ERROR - bad content header"), close)

    def test_frames_before_a_bad_frame_are_still_processed(self):
        # Everything sent at once: the declare and the 5 publishes before the bad frame count.
        name = "bad-input-before-%d" % os.getpid()
        c = self.conn()
        c.send(channel_open(1) + queue_declare(1, name, exclusive=False) +
               b"".join(basic_publish(1, "", name) + content_header(1, 2) + body(1, b"m%d" % i)
                        for i in range(5)) + frame(9, 0, b""))
        close = c.read_close()  # its values: test_unknown_frame_type
        self.assertEqual((close.class_id, close.reply_code), (10, 501), close)
        c.send(connection_close_ok())
        c.close()
        c = self.c = connect()
        c.open_channel(1)
        deadline = time.time() + TIMEOUT
        while True:
            c.send(method(1, 50, 10, struct.pack(">H", 0) + shortstr(name) + b"\x01" +
                          EMPTY_TABLE))  # passive
            payload = c.expect(50, 11, 1)
            count, = struct.unpack(">I", payload[5 + payload[4]:9 + payload[4]])
            if count == 5 or time.time() > deadline:
                break
            time.sleep(0.05)
        c.send(method(1, 50, 40, struct.pack(">H", 0) + shortstr(name) + b"\x00"))  # delete
        c.expect(50, 41, 1)
        self.assertEqual(count, 5)

    def test_queue_name_with_invalid_utf8(self):
        c = self.conn()
        c.open_channel(1)
        c.send(queue_declare(1, b"bad\xff\xfename"))
        self.hard(c, 501, "FRAME_ERROR - Malformed UTF-8 in shortstr", 0, 0)


class T3SurvivalTest(unittest.TestCase):
    """After every bad case: good clients work, random bytes do no harm."""

    def good_client(self):
        # Raw frames first (no dependency), then pika (Debian's python3-pika) when importable.
        if BROKER is not None:
            self.assertIsNone(BROKER.process.poll(), "wharfd is gone")
        c = connect()
        try:
            c.open_channel(1)
            c.send(queue_declare(1, ""))
            payload = c.expect(50, 11, 1)
            q = payload[5:5 + payload[4]]
            c.send(basic_publish(1, "", q) + content_header(1, 10) + body(1, b"still here"))
            c.send(method(1, 60, 70, struct.pack(">H", 0) + shortstr(q) + b"\x01"))  # get, no-ack
            c.expect(60, 71, 1)  # get-ok
            ftype, _, _ = c.read_frame()
            self.assertEqual(ftype, FRAME_HEADER)
            ftype, _, data = c.read_frame()
            self.assertEqual((ftype, data), (FRAME_BODY, b"still here"))
            c.send(method(0, 10, 50, struct.pack(">H", 200) + shortstr("bye") + b"\0\0\0\0"))
            c.expect(10, 51)
        finally:
            c.close()
        pika = import_pika()
        if pika is None:
            return
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", PORT, credentials=pika.PlainCredentials("guest", "guest")))
        try:
            ch = conn.channel()
            q = ch.queue_declare(queue="", exclusive=True).method.queue
            ch.basic_publish("", q, b"still here")
            deadline = time.time() + 5
            got = None
            while got is None and time.time() < deadline:
                got = ch.basic_get(q, auto_ack=True)[2]
            self.assertEqual(got, b"still here")
        finally:
            conn.close()

    def test_1_a_good_client_still_works(self):
        self.good_client()

    def survive(self, label, blobs):
        """Each blob after a handshake, 40 connections at a time: each connection must end (or
        be left waiting, 3 s at most), a good client must work afterwards, and wharfd's
        resident memory must not have grown by 64 MiB."""
        rss_before = rss_kib()
        started = time.time()
        outcomes = run_parallel(blobs)
        counts, replies = {}, {}
        for o in outcomes:
            kind = o.split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
            if o.startswith("closed: "):
                replies[o[8:]] = replies.get(o[8:], 0) + 1
        print("\n  %s: %d connections in %.1f s: %s" % (label, len(blobs),
                                                       time.time() - started, counts),
              file=sys.stderr)
        for text, n in sorted(replies.items(), key=lambda kv: -kv[1])[:8]:
            print("    %3d x %s" % (n, text), file=sys.stderr)
        errors = [(i, o) for i, o in enumerate(outcomes) if o.startswith("error")]
        self.assertEqual(errors, [], "connections that failed the handshake or did not end")
        self.good_client()
        rss_after = rss_kib()
        if rss_before is not None:
            print("  wharfd VmRSS %d KiB before, %d KiB after" % (rss_before, rss_after),
                  file=sys.stderr)
            self.assertLess(rss_after - rss_before, 64 * 1024)

    def test_2_random_bytes_after_the_handshake(self):
        rng = random.Random(1234)
        self.survive("random bytes",
                     [rng.randbytes(rng.randint(1024, 64 * 1024)) for _ in range(200)])

    def test_2b_random_frames_after_the_handshake(self):
        # Random bytes are nearly always refused at the first frame header (a random size is
        # larger than frame_max); these are well-framed methods of every class a client sends,
        # with random arguments (tables nested, strings not UTF-8, ...), publishes with random
        # properties, and now and then a frame cut, stretched or with a flipped octet.
        rng = random.Random(4321)
        self.survive("random frames", [random_frames(rng) for _ in range(200)])

    def test_3_a_good_client_still_works_after_the_fuzz(self):
        self.good_client()

    def test_4_content_headers_without_bodies_do_not_block_other_publishers(self):
        # One connection announces a message of the max size on each of 16 channels and sends
        # none of their bodies: 16 frames of 46 octets. RabbitMQ holds nothing for them, and
        # another client's 256 KiB publish goes through at once.
        a = connect()
        victim = None
        try:
            for ch in range(1, 17):
                a.send(channel_open(ch))
            for ch in range(1, 17):
                a.expect(20, 11, ch)
            a.send(b"".join(basic_publish(ch, "", "nowhere") + content_header(ch, MAX_MESSAGE)
                            for ch in range(1, 17)))
            time.sleep(0.3)
            victim = connect()
            victim.open_channel(1)
            victim.send(queue_declare(1, ""))
            payload = victim.expect(50, 11, 1)
            q = payload[5:5 + payload[4]]
            size = 256 << 10
            chunk = victim.frame_max - 8
            started = time.time()
            try:
                victim.send(basic_publish(1, "", q) + content_header(1, size) +
                            b"".join(body(1, b"v" * min(chunk, size - at))
                                     for at in range(0, size, chunk)))
                victim.send(method(1, 60, 70, struct.pack(">H", 0) + shortstr(q) + b"\x01"))
                victim.expect(60, 71, 1)
            except (socket.timeout, AssertionError, Closed) as e:
                self.fail("another client's 256 KiB publish was held up: %r after %.1f s" %
                          (e, time.time() - started))
        finally:
            a.close()
            if victim is not None:
                victim.close()


class T5ContentClockTest(unittest.TestCase):
    """Wharf's own bound (docs/operations.md, "Partial frames"; RabbitMQ has none): a publish
    whose content stops coming holds its memory at most [limits] frame_timeout_ms, then the
    connection is closed with 501, and the broker serves on. Its own wharfd, with a 1 s
    timeout."""

    def test_a_stalled_content_is_closed_after_the_frame_timeout(self):
        if BROKER is None:
            self.skipTest("Wharf's own bound: needs a wharfd of the test's own")
        from wharfd_process import Wharfd
        broker = Wharfd(BROKER_PATH, "[limits]\nframe_timeout_ms = 1000\n")
        try:
            c = Conn(port=broker.amqp_port).handshake()
            c.open_channel(1)
            # 200 KiB announced (beyond the connection's own 64 KiB: reserved from the
            # budget), 10 KiB sent, then nothing.
            started = time.time()
            c.send(basic_publish(1, "", "nowhere") + content_header(1, 200 << 10) +
                   body(1, b"s" * (10 << 10)))
            c.sock.settimeout(10)
            close = c.read_close()
            waited = time.time() - started
            self.assertEqual((close.channel, close.class_id, close.reply_code), (0, 10, 501), close)
            self.assertIn("not complete within 1000 ms", close.reply_text)
            self.assertGreaterEqual(waited, 0.9)
            self.assertLess(waited, 5)
            c.close()
            # The broker serves on.
            good = Conn(port=broker.amqp_port).handshake()
            good.open_channel(1)
            good.send(queue_declare(1, ""))
            good.expect(50, 11, 1)
            good.close()
        finally:
            self.assertEqual(broker.stop(), 0, broker.read_log()[-3000:])


def run_parallel(blobs, threads=40):
    """fuzz_one for each blob, threads at a time; the outcomes in order."""
    outcomes = [None] * len(blobs)
    next_index = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(blobs):
                return
            outcomes[i] = fuzz_one(blobs[i])

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return outcomes


# The arguments of each method a client sends: h short, l long, L longlong, b bit octet,
# s shortstr, S longstr, t table.
CLIENT_METHODS = {
    (10, 50): "hshh", (10, 51): "", (10, 70): "Ss",
    (20, 10): "s", (20, 20): "b", (20, 21): "b", (20, 40): "hshh", (20, 41): "",
    (40, 10): "hssbt", (40, 20): "hsb", (40, 30): "hsssbt", (40, 40): "hsssbt",
    (50, 10): "hsbt", (50, 20): "hsssbt", (50, 30): "hsb", (50, 40): "hsb", (50, 50): "hssst",
    (60, 10): "lhb", (60, 20): "hssbt", (60, 30): "sb", (60, 40): "hssb", (60, 70): "hsb",
    (60, 80): "Lb", (60, 90): "Lb", (60, 100): "b", (60, 110): "b", (60, 120): "Lb",
    (85, 10): "b", (90, 10): "", (90, 20): "", (90, 30): "",
}
NAMES = [b"", b"fz1", b"fz2", b"amq.direct", b"amq.fanout", b"amq.topic", b"amq.gen-x",
         b"amq.rabbitmq.reply-to", b"x-delayed-message", b"direct", b"topic", b"headers",
         b"\xff\xfe", b"\xc3\x28", b"caf\xc3\xa9", b"#", b"*.x"]
ARG_KEYS = [b"x-message-ttl", b"x-expires", b"x-max-length", b"x-max-length-bytes",
            b"x-overflow", b"x-dead-letter-exchange", b"x-dead-letter-routing-key",
            b"x-queue-type", b"x-delivery-limit", b"x-max-priority", b"x-single-active-consumer",
            b"alternate-exchange", b"x-delayed-type", b"x-match", b"x-priority",
            b"x-cancel-on-ha-failover", b"k"]


def random_value(rng, depth):
    t = rng.choice(b"tbBsuUiIlLfdDSATFVx" + (b"FA" if depth < 3 else b""))
    t = bytes([t])
    if t in (b"t", b"b", b"B"):
        v = bytes([rng.choice([0, 1, 2, 255])])
    elif t in (b"s", b"u", b"U"):
        v = struct.pack(">h", rng.choice([0, 1, -1, 32767]))
    elif t in (b"i", b"I"):
        v = struct.pack(">i", rng.choice([0, 1, -1, 1000, 2 ** 31 - 1]))
    elif t in (b"l", b"L", b"T"):
        v = struct.pack(">q", rng.choice([0, 1, -1, 60000, 2 ** 63 - 1, -2 ** 63]))
    elif t == b"f":
        v = struct.pack(">f", rng.choice([0.0, 1.5, float("nan"), float("inf")]))
    elif t == b"d":
        v = struct.pack(">d", rng.choice([0.0, -1.5, float("nan"), float("-inf")]))
    elif t == b"D":
        v = bytes([rng.randrange(256)]) + struct.pack(">i", rng.randrange(-2 ** 31, 2 ** 31))
    elif t in (b"S", b"x"):
        v = longstr(rng.choice(NAMES + [b"quorum", b"classic", b"stream", b"reject-publish",
                                        b"drop-head", b"all", b"any"]))
    elif t == b"F":
        v = random_table(rng, depth + 1)
    elif t == b"A":
        items = b"".join(random_value(rng, depth + 1) for _ in range(rng.randrange(4)))
        v = struct.pack(">I", len(items)) + items
    else:  # V
        v = b""
    return t + v


def random_table(rng, depth=0):
    entries = b"".join(shortstr(rng.choice(ARG_KEYS)) + random_value(rng, depth)
                       for _ in range(rng.randrange(4)))
    return struct.pack(">I", len(entries)) + entries


def random_args(rng, kinds):
    out = []
    for k in kinds:
        if k == "h":
            out.append(struct.pack(">H", rng.choice([0, 1, 200, 404, 65535])))
        elif k == "l":
            out.append(struct.pack(">I", rng.choice([0, 1, 100, 2 ** 32 - 1])))
        elif k == "L":
            out.append(struct.pack(">Q", rng.choice([0, 1, 2, 3, 2 ** 64 - 1])))
        elif k == "b":
            out.append(bytes([rng.randrange(256)]))
        elif k == "s":
            out.append(shortstr(rng.choice(NAMES)))
        elif k == "S":
            out.append(longstr(rng.choice(NAMES)))
        elif k == "t":
            out.append(random_table(rng))
    return b"".join(out)


def random_properties(rng):
    flags = rng.randrange(0x10000) & 0xFFFC  # bit 0 would announce more flag words
    out = []
    for bit, kind in zip(range(15, 1, -1), "sstbbssssLssss"):
        if flags & (1 << bit):
            if kind == "s":
                out.append(shortstr(rng.choice(NAMES + [b"60000", b"-1", b"guest", b"1e3"])))
            elif kind == "t":
                out.append(random_table(rng))
            elif kind == "b":
                out.append(bytes([rng.randrange(256)]))
            else:
                out.append(struct.pack(">Q", rng.randrange(2 ** 64)))
    return struct.pack(">H", flags) + b"".join(out)


def mutate(rng, data):
    """One frame spoilt: its payload cut or stretched (the size field follows), or one octet
    flipped anywhere (the size and the frame-end too)."""
    r = rng.random()
    if r < 0.4 and len(data) > 8:  # cut the payload, fixing the frame's size
        n = rng.randrange(7, len(data) - 1)
        payload = data[7:n]
        return data[:3] + struct.pack(">I", len(payload)) + payload + b"\xce"
    if r < 0.7:  # stretch it
        payload = data[7:-1] + rng.randbytes(rng.randrange(1, 16))
        return data[:3] + struct.pack(">I", len(payload)) + payload + b"\xce"
    i = rng.randrange(len(data))  # flip one octet anywhere
    return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]


MUTATE = 0.04  # the share of frames mutate() spoils


def random_frames(rng):
    """A handful of channels opened, then random frames; now and then one is mutated."""
    out = [channel_open(1), channel_open(2)]
    for _ in range(rng.randrange(5, 60)):
        channel = rng.choices([1, 2, 3, 0], [60, 36, 2, 2])[0]
        r = rng.random()
        if r < 0.6:
            ids = rng.choice(list(CLIENT_METHODS))
            frames = [method(channel, ids[0], ids[1], random_args(rng, CLIENT_METHODS[ids]))]
        elif r < 0.95:
            size = rng.choice([0, 1, 5, 100, 5000])
            data = rng.randbytes(size)
            props = random_properties(rng)
            frames = [basic_publish(channel, rng.choice(NAMES[:6]), rng.choice(NAMES),
                                    rng.random() < 0.3),
                      frame(FRAME_HEADER, channel, struct.pack(">HHQ", 60, 0, size) + props)]
            cut = rng.choice([size, size // 2, 1]) if size else 0
            if cut:
                frames.append(body(channel, data[:cut]))
            if size - cut > 0:
                frames.append(body(channel, data[cut:]))
        else:
            frames = [frame(rng.choice([1, 2, 3, 8, 4, 0, 255]), channel,
                            rng.randbytes(rng.randrange(0, 40)))]
        if rng.random() < MUTATE:
            i = rng.randrange(len(frames))
            frames[i] = mutate(rng, frames[i])
        out.extend(frames)
    return b"".join(out)


def import_pika():
    """pika, or None. python3 may be another interpreter than Debian's (python3-pika)."""
    try:
        import pika
        return pika
    except ImportError:
        pass
    debian = "/usr/lib/python3/dist-packages"
    if not os.path.isdir(os.path.join(debian, "pika")):
        return None
    sys.path.append(debian)
    try:
        import pika
        return pika
    except ImportError:
        return None


def fuzz_one(blob):
    """Handshake, random bytes, then wait for the broker to close: a connection.close is
    answered with close-ok, as a client would; 3 s without the end is a timeout. Returns
    "closed[: reply]", "timeout..." or "error: ..."."""
    try:
        c = connect()
    except Exception as e:  # noqa: BLE001 - reported by the caller
        return "error: handshake: %r" % e
    try:
        c.sock.settimeout(3.0)
        try:
            c.send(blob)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        except socket.timeout:
            return "timeout: send"
        reply = ""
        try:
            while True:
                ch, cls, mth, payload = c.read_method()
                if (cls, mth) == (10, 50):
                    close = Close(ch, payload)
                    reply = "%d %s" % (close.reply_code,
                                       re.sub(r"[0-9]+", "N", close.reply_text[:50]))
                    c.send(connection_close_ok())
                    break
        except (Closed, BrokenPipeError, ConnectionResetError):
            return "closed: " + (reply or "no close")
        except socket.timeout:
            return "timeout"
        except Exception as e:  # noqa: BLE001 - a malformed answer
            return "error: %r" % e
        return ("closed: " + reply) if c.wait_closed(3.0) else "timeout: after close-ok"
    except Exception as e:  # noqa: BLE001
        return "error: %r" % e
    finally:
        c.close()


def rss_kib():
    if BROKER is None:
        return None
    with open("/proc/%d/status" % BROKER.process.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


SANITIZER = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|"
                       r"SUMMARY: (Address|Undefined|Leak)Sanitizer")

if __name__ == "__main__":
    port = os.environ.get("AMQP_BAD_INPUT_PORT")
    if len(sys.argv) > 2 and sys.argv[1] == "--port":
        port = sys.argv[2]
        del sys.argv[1:3]
    if port:
        PORT = int(port)
        result = unittest.main(exit=False, verbosity=2).result
        sys.exit(0 if result.wasSuccessful() else 1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from wharfd_process import Wharfd
    wharfd = sys.argv.pop(1)
    BROKER_PATH = wharfd
    BROKER = Wharfd(wharfd)
    PORT = BROKER.amqp_port
    try:
        result = unittest.main(exit=False, verbosity=2).result
    finally:
        code = BROKER.stop()
    log = BROKER.read_log()
    failed = not result.wasSuccessful()
    if SANITIZER.search(log):
        print("sanitizer report in wharfd's log")
        failed = True
    if code != 0:
        print("wharfd exited with", code)
        failed = True
    if failed:
        print(log[-20000:])
        sys.exit(1)
    shutil.rmtree(BROKER.dir, ignore_errors=True)
