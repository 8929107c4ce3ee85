#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) from real traffic: a real
wharfd, and real clients talking to it through a recording proxy: wharfctl for the native
protocol (both directions: the broker reads requests, the client reads replies) and pika for
AMQP 0-9-1. The AMQP frames are then cut into the method, properties and field-table seeds.
Store, config and topic seeds are written from the formats' definitions (store/keys.h).

    fuzz/make_seeds.py build/src/server/wharfd build/src/ctl/wharfctl

The seeds are committed; this script is how they were made (docs/testing.md, "Fuzzing").
"""
import hashlib
import os
import socket
import struct
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from wharfd_process import Wharfd  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")


def put(target, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


class Proxy:
    """Accepts one connection at a time on a free port and relays it to `port`, keeping what
    each side sent."""

    def __init__(self, port):
        self.port = port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.sessions = []  # (client bytes, server bytes)

    def address(self):
        return "127.0.0.1:%d" % self.listener.getsockname()[1]

    def serve(self, count):
        def run():
            for _ in range(count):
                client, _ = self.listener.accept()
                server = socket.create_connection(("127.0.0.1", self.port))
                sent = [bytearray(), bytearray()]

                def pump(src, dst, into):
                    while True:
                        try:
                            data = src.recv(65536)
                        except OSError:
                            data = b""
                        if not data:
                            try:
                                dst.shutdown(socket.SHUT_WR)
                            except OSError:
                                pass
                            return
                        into.extend(data)
                        dst.sendall(data)

                a = threading.Thread(target=pump, args=(client, server, sent[0]))
                b = threading.Thread(target=pump, args=(server, client, sent[1]))
                a.start()
                b.start()
                a.join()
                b.join()
                client.close()
                server.close()
                self.sessions.append((bytes(sent[0]), bytes(sent[1])))

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t


def native(wharfd, wharfctl):
    proxy = Proxy(wharfd.ports["native"])
    commands = [
        ["declare-queue", "orders", "--max-length", "1000"],
        ["declare-exchange", "events", "topic"],
        ["bind", "events", "orders", "order.#"],
        ["publish", "events", "order.new", "a body", "--header", "k=v", "--persistent"],
        ["publish", "", "orders", "second"],
        ["queues"],
        ["exchanges"],
        ["bindings"],
        ["peek", "orders"],
        ["connections"],
        ["consumers"],
        ["delayed", "list", "orders"],
    ]
    thread = proxy.serve(len(commands))
    for args in commands:
        subprocess.run([wharfctl, "--server", proxy.address()] + args, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
    thread.join(30)
    for i, (client, server) in enumerate(proxy.sessions):
        # Byte 0: limits (large frames, no allowance); byte 1: the seed of the read sizes.
        put("native_frame", bytes([3, i]) + client)
        put("native_frame", bytes([3 | 8, i]) + server)


def frames(stream):
    """AMQP frames after the protocol header: (type, channel, payload)."""
    out = []
    pos = 8 if stream.startswith(b"AMQP") else 0
    while pos + 7 <= len(stream):
        ftype, channel, size = struct.unpack(">BHI", stream[pos:pos + 7])
        out.append((ftype, channel, stream[pos + 7:pos + 7 + size]))
        pos += 8 + size
    return out


def amqp(wharfd):
    import pika
    proxy = Proxy(wharfd.ports["amqp"])
    thread = proxy.serve(1)
    host, port = proxy.address().split(":")
    params = pika.ConnectionParameters(host=host, port=int(port),
                                       credentials=pika.PlainCredentials("guest", "guest"),
                                       client_properties={"product": "wharf fuzz seeds"})
    connection = pika.BlockingConnection(params)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.exchange_declare("logs", "headers", arguments={"alternate-exchange": "amq.fanout"})
    channel.queue_declare("jobs", durable=True,
                          arguments={"x-max-length": 100, "x-message-ttl": 60000,
                                     "x-dead-letter-exchange": "", "x-max-priority": 5,
                                     "x-list": [1, "two", True], "x-table": {"a": -1}})
    channel.queue_bind("jobs", "logs", arguments={"x-match": "any", "level": "error"})
    props = pika.BasicProperties(content_type="text/plain", content_encoding="utf-8",
                                 headers={"k": "v", "n": 42, "b": True,
                                          "nested": {"x": [1, 2]}, "bytes": b"\x00\xff"},
                                 delivery_mode=2, priority=3, correlation_id="c1",
                                 reply_to="replies", expiration="60000",
                                 message_id="m1", timestamp=1700000000, type="t",
                                 user_id="guest", app_id="seeds")
    channel.basic_publish("", "jobs", b"hello" * 100, props)
    channel.basic_qos(prefetch_count=10)
    method, _, _ = channel.basic_get("jobs")
    if method:
        channel.basic_nack(method.delivery_tag, requeue=True)
    for method, _, _ in channel.consume("jobs", inactivity_timeout=1):
        if method is None:
            break
        channel.basic_ack(method.delivery_tag)
    channel.cancel()
    channel.queue_purge("jobs")
    channel.queue_delete("jobs")
    connection.close()
    thread.join(30)
    client, server = proxy.sessions[0]
    put("amqp_frame", bytes([0, 1]) + client)
    put("amqp_frame", bytes([1, 7]) + client)
    for ftype, _, payload in frames(client) + frames(server):
        if ftype == 1:
            put("amqp_method", payload)
            # A table argument's content: connection.start(-ok)'s properties, and the
            # arguments of queue.declare, exchange.declare and queue.bind (the table is last).
            cls, meth = struct.unpack(">HH", payload[:4])
            if (cls, meth) in [(10, 10), (10, 11)]:
                start = 4 + (2 if meth == 10 else 0)
                size = struct.unpack(">I", payload[start:start + 4])[0]
                put("amqp_field_table", payload[start + 4:start + 4 + size])
                if meth == 11:  # start-ok: mechanism, then the response (PLAIN)
                    pos = start + 4 + size
                    pos += 1 + payload[pos]
                    rsize = struct.unpack(">I", payload[pos:pos + 4])[0]
                    put("amqp_field_table", payload[pos + 4:pos + 4 + rsize])
            elif (cls, meth) in [(50, 10), (40, 10), (50, 20)]:
                for cut in range(len(payload) - 4, 3, -1):
                    size = struct.unpack(">I", payload[cut:cut + 4])[0]
                    if cut + 4 + size == len(payload):
                        put("amqp_field_table", payload[cut + 4:])
                        break
        elif ftype == 2:
            put("amqp_properties", payload[12:])


def store():
    be64 = lambda v: struct.pack(">Q", v)  # noqa: E731
    le64 = lambda v: struct.pack("<Q", v)  # noqa: E731
    le32 = lambda v: struct.pack("<I", v)  # noqa: E731

    def varint(v):
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            out.append(b | (0x80 if v else 0))
            if not v:
                return bytes(out)

    def field(number, value):
        if isinstance(value, int):
            return varint(number << 3) + varint(value)
        return varint(number << 3 | 2) + varint(len(value)) + value

    # An inline entry (flags 4): header, then a MessageRecord with a body (field 1... as the
    # fuzzer finds the rest); an entry with attempts (flags 8) too.
    record = field(1, b"body") + field(2, b"payload")
    put("store_records", b"\x00" + le64(7) + le32(1) + b"\x04" + record)
    put("store_records", b"\x00" + le64(7) + le32(3) + b"\x0c" + le32(4) + field(1, 5) +
        field(2, 1) + record)
    put("store_records", b"\x01" + be64(3) + be64(42))
    put("store_records", b"\x02" + be64(3) + b"T" + be64(1700000000000 ^ (1 << 63)) + be64(9))
    put("store_records", b"\x03" + le64(10) + le64(20) + le64(10) + le64(0))
    put("store_records", b"\x04" + le64(9) + le64(1700000000000))
    # Deduplication runs (keys.h): format 14 (a 0 byte; shared prefix, rest, id and expiry as
    # zigzag differences) with keys "id-30" and "id-31"; format 13 (length, key, fixed64s).
    put("store_records", b"\x04\x00" + varint(0) + varint(5) + b"id-30" + varint(660) +
        varint(3400000000000) + varint(4) + varint(1) + b"1" + varint(2) + varint(0))
    put("store_records", b"\x04" + b"\x05id-30" + le64(330) + le64(1700000000000) +
        b"\x05id-31" + le64(331) + le64(1700000000000))
    put("store_records", b"\x05" + field(1, b"events") + field(2, 2) + field(3, 1))
    put("store_records", b"\x06" + field(1, b"orders") + field(2, 1) + field(3, 5))
    put("store_records", b"\x07" + field(1, b"events") + field(2, b"orders") + field(3, b"a.#"))
    put("store_records", b"\x08" + field(1, b"dlq") + field(2, 100))
    put("store_records", b"\x09" + field(1, b"alice") + field(2, b"pbkdf2$x") + field(3, 1))
    # Format 9: a vhost record, and a queue and a binding of the vhost "shop".
    put("store_records", b"\x0a" + field(1, b"shop") + field(2, b"the shop") + field(3, 10) +
        field(4, 100))
    put("store_records", b"\x06" + field(1, b"orders") + field(2, 1) + field(5, b"shop"))
    put("store_records", b"\x07" + field(1, b"events") + field(2, b"orders") + field(6, b"shop"))


def config():
    with open(os.path.join(HERE, "..", "config", "wharfd.toml"), "rb") as f:
        put("config", f.read())
    put("config", b'[server]\nlisten = "127.0.0.1:5680"\n[tls]\nlisten = "0.0.0.0:5681"\n'
        b'cert = "a.pem"\nkey = "k.pem"\nca = "ca.pem"\nverify = "required"\n'
        b'cert_login = "common_name"\nmin_version = "1.3"\n')
    put("config", b'[auth]\nloopback_guest = false\n[[auth.users]]\nname = "alice"\n'
        b'password_hash = "pbkdf2-sha256$20000$c2FsdA$aGFzaA"\n[limits]\nmax_connections = 10\n')
    put("config", b'[[auth.users]]\nname = "shopper"\npassword_hash = "pbkdf2-sha256$20000$c2FsdA$aGFzaA"\n'
        b'tags = []\npermissions = [{vhost = "shop", configure = ".*", write = "", read = "^a"}]\n')


def definitions():
    # RabbitMQ 3.10.8's own exports (tests/integration/definitions/), and Wharf's spellings.
    for name in ("rabbitmq-3.10.8-export.json", "rabbitmq-3.10.8-api.json"):
        with open(os.path.join(HERE, "..", "tests", "integration", "definitions", name), "rb") as f:
            put("definitions", f.read())
    put("definitions", b'{"users": [{"name": "w", "hashing_algorithm": "wharf_pbkdf2_sha256", '
        b'"password_hash": "pbkdf2-sha256$1000$00$' + b"0" * 64 + b'", "tags": "a,b", '
        b'"limits": {"max-connections": 3}}], "parameters": [{"component": "vhost-limits", '
        b'"vhost": "v", "value": {"max-queues": 2}}], "queues": [{"name": "q", "arguments": '
        b'{"x-b": {"type": "bytes", "base64": "AA=="}}}]}')


def topic():
    put("topic_pattern", b"+a.b.c\n+a.*.c\n+a.#\n+#\n+*.b.#\n?a.b.c\n?a\n?\n-a.#\n?a.x.c\n")
    put("topic_pattern", b"+#.#.#\n+*.*\n+..\n+#.a.#.b\n?a.b\n?x.a.y.b\n?..\n?#.*\n-#.#.#\n?a\n")


def main():
    wharfd_path, wharfctl_path = sys.argv[1], sys.argv[2]
    server = Wharfd(wharfd_path)
    try:
        with open(os.path.join(server.dir, "ready")) as f:
            server.ports["native"] = int(f.readline().strip().rsplit(":", 1)[1])
        native(server, wharfctl_path)
        amqp(server)
    finally:
        server.stop()
    store()
    config()
    topic()
    definitions()
    for target in sorted(os.listdir(CORPUS)):
        print(target, len(os.listdir(os.path.join(CORPUS, target))))


if __name__ == "__main__":
    main()
