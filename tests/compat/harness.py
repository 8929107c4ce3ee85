"""Plumbing for the differential AMQP scenarios (see README.md).

Everything here observes what a broker sends, as pika 1.2 (Debian's python3-pika) receives it:

* a frame tap on every pika connection: every method frame the broker sends, with its fields,
  and the content (properties and body) that follows a deliver, get-ok or return, in arrival
  order. Scenarios read deliveries, returns, confirms and broker-sent cancels from it, so the
  order of events is recorded exactly as it came off the wire;
* a typed view of the `headers` property: pika 1.2 decodes several integer letters with the
  wrong signedness and forgets every type letter, so the content header's raw bytes are kept
  and the headers table is decoded again here into [letter, value] pairs;
* `Raw(letter, payload)`, a field value pika encodes byte for byte, for the type letters pika
  cannot produce itself (b B s u i L f U ...);
* `Ctx`, one per scenario run: names, connections, steps with a time limit, errors recorded as
  {error, code, text, class_id, method_id}, and clean-up.

Only what is random by nature is normalised: server-generated queue names (amq.gen-...),
consumer tags (amq.ctag-..., pika's ctagN.<uuid>) and x-death timestamps.
"""
import hashlib
import logging
import re
import signal
import struct
import time

import pika
import pika.connection
import pika.data
import pika.exceptions
import pika.frame
import pika.spec

from pika.adapters import blocking_connection as _blocking

logging.getLogger("pika").setLevel(logging.CRITICAL + 1)


# BlockingChannel keeps one persistent "consume-ok arrived" flag and asserts that it is not
# set twice; consumes sent raw (Ctx.consume) never reset it, so let it be set again.
def _signal_once(self, *_args, **_kwargs):
    self._ready = True


_blocking._CallbackResult.signal_once = _signal_once

# A broker-sent basic.cancel for a consumer that pika does not know (sent raw) is only
# recorded by the tap.
_orig_cancelled_by_broker = _blocking.BlockingChannel._on_consumer_cancelled_by_broker


def _on_consumer_cancelled_by_broker(self, method_frame):
    if method_frame.method.consumer_tag in self._consumer_infos:
        _orig_cancelled_by_broker(self, method_frame)


_blocking.BlockingChannel._on_consumer_cancelled_by_broker = _on_consumer_cancelled_by_broker

STEP_TIMEOUT_S = 5.0
BARRIER_EXCHANGE = "amq.direct"
SETTLE_S = 0.03


# ----------------------------------------------------------------------------------------------
# Raw field values (encoding side)

class Raw:
    """A field-table value sent exactly as `letter` + `payload`."""

    def __init__(self, letter, payload):
        self.letter = letter.encode() if isinstance(letter, str) else letter
        self.payload = payload


def raw_int(letter, value):
    fmt = {"b": ">b", "B": ">B", "s": ">h", "U": ">h", "u": ">H", "I": ">i", "i": ">I",
           "l": ">q", "L": ">q"}[letter]
    return Raw(letter, struct.pack(fmt, value))


_orig_encode_value = pika.data.encode_value


def _encode_value(pieces, value):
    if isinstance(value, Raw):
        pieces.append(value.letter + value.payload)
        return 1 + len(value.payload)
    return _orig_encode_value(pieces, value)


pika.data.encode_value = _encode_value


# ----------------------------------------------------------------------------------------------
# Typed decoding (receiving side)

_orig_props_decode = pika.spec.BasicProperties.decode


def _props_decode(self, encoded, offset=0):
    self._compat_raw = bytes(encoded[offset:])
    return _orig_props_decode(self, encoded, offset)


pika.spec.BasicProperties.decode = _props_decode


def _text(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": b.hex()}


def typed_table(buf, off):
    size = struct.unpack_from(">I", buf, off)[0]
    off += 4
    end = off + size
    out = {}
    while off < end:
        klen = buf[off]
        key = _text(buf[off + 1:off + 1 + klen])
        off += 1 + klen
        out[key if isinstance(key, str) else repr(key)], off = typed_value(buf, off)
    return out, off


_INT_FORMATS = {"b": ">b", "B": ">B", "s": ">h", "U": ">h", "u": ">H", "I": ">i", "i": ">I",
                "l": ">q", "L": ">Q"}


def typed_value(buf, off):
    k = chr(buf[off])
    off += 1
    if k == "t":
        return ["t", buf[off]], off + 1
    if k in _INT_FORMATS:
        fmt = _INT_FORMATS[k]
        return [k, struct.unpack_from(fmt, buf, off)[0]], off + struct.calcsize(fmt)
    if k == "f":
        return ["f", repr(struct.unpack_from(">f", buf, off)[0])], off + 4
    if k == "d":
        return ["d", repr(struct.unpack_from(">d", buf, off)[0])], off + 8
    if k == "D":
        scale = buf[off]
        raw = struct.unpack_from(">i", buf, off + 1)[0]
        return ["D", [scale, raw]], off + 5
    if k in ("S", "x"):
        n = struct.unpack_from(">I", buf, off)[0]
        data = buf[off + 4:off + 4 + n]
        return [k, _text(data) if k == "S" else data.hex()], off + 4 + n
    if k == "T":
        return ["T", struct.unpack_from(">Q", buf, off)[0]], off + 8
    if k == "F":
        t, off = typed_table(buf, off)
        return ["F", t], off
    if k == "A":
        n = struct.unpack_from(">I", buf, off)[0]
        off += 4
        end = off + n
        items = []
        while off < end:
            v, off = typed_value(buf, off)
            items.append(v)
        return ["A", items], off
    if k == "V":
        return ["V", None], off
    raise ValueError("unknown field type %r" % k)


def typed_headers(props):
    """The headers property as [letter, value] pairs, or None when the flag is unset."""
    raw = getattr(props, "_compat_raw", None)
    if raw is None:
        return None
    flags = struct.unpack_from(">H", raw, 0)[0]
    off = 2
    if not flags & pika.spec.BasicProperties.FLAG_HEADERS:
        return None
    for flag in (pika.spec.BasicProperties.FLAG_CONTENT_TYPE,
                 pika.spec.BasicProperties.FLAG_CONTENT_ENCODING):
        if flags & flag:
            off += 1 + raw[off]
    table, _ = typed_table(raw, off)
    xdeath = table.get("x-death")
    if xdeath and xdeath[0] == "A":
        for entry in xdeath[1]:
            if entry[0] == "F" and "time" in entry[1] and entry[1]["time"][0] == "T":
                entry[1]["time"] = ["T", "<time>"]
    return table


PROP_FIELDS = ("content_type", "content_encoding", "delivery_mode", "priority",
               "correlation_id", "reply_to", "expiration", "message_id", "timestamp", "type",
               "user_id", "app_id", "cluster_id")


def render_props(props):
    out = {}
    for f in PROP_FIELDS:
        v = getattr(props, f, None)
        if v is not None:
            out[f] = render(v)
    h = typed_headers(props)
    if h is not None:
        out["headers"] = h
    elif props.headers is not None:
        out["headers"] = render(props.headers)
    return out


def render_body(body):
    if body is None:
        return None
    body = bytes(body)
    if len(body) > 256:
        return {"len": len(body), "sha1": hashlib.sha1(body).hexdigest()}
    return _text(body)


# ----------------------------------------------------------------------------------------------
# Normalisation

_RANDOM = [
    (re.compile(r"amq\.gen-[A-Za-z0-9_\-]+"), "amq.gen-<id>"),
    (re.compile(r"amq\.ctag-[A-Za-z0-9_\-]+"), "amq.ctag-<id>"),
    (re.compile(r"ctag(\d+)\.[0-9a-f]{32}"), r"ctag\1.<uuid>"),
    (re.compile(r"amq\.rabbitmq\.reply-to\.[^\s'\"]+"), "amq.rabbitmq.reply-to.<id>"),
]


def norm_str(s):
    for rx, rep in _RANDOM:
        s = rx.sub(rep, s)
    return s


def normalise(v):
    if isinstance(v, str):
        return norm_str(v)
    if isinstance(v, dict):
        return {norm_str(str(k)): normalise(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [normalise(x) for x in v]
    return v


# ----------------------------------------------------------------------------------------------
# Rendering of pika objects

def render_method(m):
    out = {"m": m.NAME}
    for k, v in vars(m).items():
        if k.startswith("_"):
            continue
        out[k] = render(v)
    return out


def render(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (bytes, bytearray)):
        return _text(bytes(v))
    if isinstance(v, pika.frame.Method):
        return render_method(v.method)
    if isinstance(v, pika.amqp_object.Method):
        return render_method(v)
    if isinstance(v, pika.spec.BasicProperties):
        return render_props(v)
    if isinstance(v, dict):
        return {str(k): render(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [render(x) for x in v]
    return repr(v)


def render_get(result):
    method, props, body = result
    if method is None:
        return {"m": "Basic.GetEmpty"}
    out = render_method(method)
    out["props"] = render_props(props)
    out["body"] = render_body(body)
    return out


# ----------------------------------------------------------------------------------------------
# Frame tap

_CONTENT_METHODS = ("Basic.Deliver", "Basic.GetOk", "Basic.Return")
_orig_process_frame = pika.connection.Connection._process_frame


def _process_frame(self, fv):
    try:
        tap = self.__dict__.setdefault("_compat_tap", [])
        pending = self.__dict__.setdefault("_compat_pending", {})
        if isinstance(fv, pika.frame.Method):
            entry = {"ch": fv.channel_number, "method": fv.method, "t": time.monotonic()}
            tap.append(entry)
            if fv.method.NAME in _CONTENT_METHODS:
                pending[fv.channel_number] = entry
        elif isinstance(fv, pika.frame.Header):
            e = pending.get(fv.channel_number)
            if e is not None:
                e["props"] = fv.properties
                e["size"] = fv.body_size
                e["body"] = b""
                if fv.body_size == 0:
                    pending.pop(fv.channel_number, None)
        elif isinstance(fv, pika.frame.Body):
            e = pending.get(fv.channel_number)
            if e is not None:
                e["body"] += fv.fragment
                if len(e["body"]) >= e["size"]:
                    pending.pop(fv.channel_number, None)
    except Exception:  # the tap must never break pika
        pass
    return _orig_process_frame(self, fv)


pika.connection.Connection._process_frame = _process_frame


def tap_of(conn):
    return conn._impl.__dict__.setdefault("_compat_tap", [])


def render_entry(e):
    out = render_method(e["method"])
    if "props" in e:
        out["props"] = render_props(e["props"])
        out["body"] = render_body(e.get("body"))
    return out


# ----------------------------------------------------------------------------------------------
# Errors

class StepTimeout(Exception):
    pass


class ScenarioAborted(Exception):
    pass


def _on_alarm(signum, frame):
    raise StepTimeout()


# ----------------------------------------------------------------------------------------------
# Scenario context

class Ctx:
    def __init__(self, scenario, host, port):
        self.scenario = scenario
        self.host = host
        self.port = port
        self.record = {}
        self.names = []
        self.conns = []

    # names --------------------------------------------------------------------------------
    def name(self, suffix):
        n = "cx.%s.%s" % (self.scenario, suffix)
        if n not in self.names:
            self.names.append(n)
        return n

    # connections --------------------------------------------------------------------------
    def params(self, **kw):
        return pika.ConnectionParameters(
            self.host, self.port, credentials=pika.PlainCredentials("guest", "guest"),
            connection_attempts=1, socket_timeout=5, stack_timeout=10,
            blocked_connection_timeout=None, **kw)

    def _open(self, **kw):
        c = self.guarded(lambda: pika.BlockingConnection(self.params(**kw)), "connect")
        self.conns.append(c)
        return c

    def connect(self, **kw):
        """A connection that reconnects when a channel is asked of it after the broker
        closed it (so a scenario goes on after a hard error, on a new connection)."""
        return ConnProxy(self, kw)

    def guarded(self, fn, what):
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, STEP_TIMEOUT_S)
        try:
            return fn()
        except StepTimeout:
            self.record[self._label("_timeout")] = what
            raise ScenarioAborted("%s timed out" % what)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    # steps --------------------------------------------------------------------------------
    def _label(self, label):
        if label not in self.record:
            return label
        i = 2
        while "%s#%d" % (label, i) in self.record:
            i += 1
        return "%s#%d" % (label, i)

    def note(self, label, value):
        self.record[self._label(label)] = normalise(value)
        return value

    def _close_info(self, code, text, kind):
        """class_id/method_id of the newest close frame with this code and text."""
        best = None
        for c in self.conns:
            for e in tap_of(c):
                m = e["method"]
                if m.NAME == kind and m.reply_code == code and m.reply_text == text:
                    if best is None or e["t"] > best["t"]:
                        best = e
        if best is None:
            return {}
        return {"class_id": best["method"].class_id, "method_id": best["method"].method_id}

    def error_record(self, exc):
        if isinstance(exc, pika.exceptions.ChannelClosedByBroker):
            out = {"error": "channel.close", "code": exc.reply_code, "text": exc.reply_text}
            out.update(self._close_info(exc.reply_code, exc.reply_text, "Channel.Close"))
            return out
        if isinstance(exc, pika.exceptions.ConnectionClosedByBroker):
            out = {"error": "connection.close", "code": exc.reply_code, "text": exc.reply_text}
            out.update(self._close_info(exc.reply_code, exc.reply_text, "Connection.Close"))
            return out
        if isinstance(exc, pika.exceptions.UnroutableError):
            return {"error": "UnroutableError",
                    "returned": [dict(render_method(m.method), props=render_props(m.properties),
                                      body=render_body(m.body)) for m in exc.messages]}
        if isinstance(exc, pika.exceptions.NackError):
            return {"error": "NackError",
                    "returned": [dict(render_method(m.method), props=render_props(m.properties),
                                      body=render_body(m.body)) for m in exc.messages]}
        if isinstance(exc, (pika.exceptions.StreamLostError,
                            pika.exceptions.ConnectionClosed)):
            return {"error": type(exc).__name__}
        return {"error": type(exc).__name__, "text": str(exc)}

    def do(self, label, fn, render_with=render):
        """Run one step under a time limit and record what it returned or how it failed.
        A step that times out aborts the scenario (the connection state is unknown)."""
        label = self._label(label)
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, STEP_TIMEOUT_S)
        try:
            result = fn()
            value = "ok" if result is None else render_with(result)
        except StepTimeout:
            self.record[label] = {"error": "timeout",
                                  "text": "no answer within %.0f s" % STEP_TIMEOUT_S}
            raise ScenarioAborted("step %r timed out" % label)
        except Exception as exc:  # recorded, the scenario goes on
            value = self.error_record(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        self.record[label] = normalise(value)
        return value

    def get(self, label, ch, queue, auto_ack=False):
        return self.do(label, lambda: ch.basic_get(queue, auto_ack=auto_ack), render_get)

    # helpers ------------------------------------------------------------------------------
    def barrier(self, ch):
        """A synchronous round trip on `ch`, so that an error caused by an earlier
        asynchronous method (publish, ack, ...) arrives before it returns."""
        ch.exchange_declare(BARRIER_EXCHANGE, "direct", passive=True)
        # RabbitMQ hands a publish to the queue asynchronously (via delegates), so a count
        # taken right after the round trip can miss it; give the queues a moment.
        time.sleep(SETTLE_S)

    def publish_sync(self, ch, exchange, rk, body, props=None, mandatory=False):
        ch.basic_publish(exchange, rk, body, props, mandatory=mandatory)
        self.barrier(ch)

    def pump(self, conn, seconds):
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            conn.process_data_events(time_limit=left)

    def wait(self, conn, pred, timeout=2.0):
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            conn.process_data_events(time_limit=min(left, 0.05))
        return True

    def mark(self, conn):
        return len(tap_of(conn))

    def entries(self, conn, since=0, ch=None, names=None):
        out = []
        for e in tap_of(conn)[since:]:
            if ch is not None and e["ch"] != ch.channel_number:
                continue
            if names is not None and e["method"].NAME not in names:
                continue
            out.append(e)
        return out

    def events(self, conn, since=0, ch=None, names=None):
        return [render_entry(e) for e in self.entries(conn, since, ch, names)]

    def count(self, conn, since, ch, name):
        return len(self.entries(conn, since, ch, (name,)))

    def raw(self, conn, ch, method, content=None, replies=(), timeout=2.0):
        """Send `method` on `ch` behind pika's back (no client-side checks), then pump until
        one of `replies` arrives on that channel, the channel or connection is closed by the
        broker (raised like pika does), or `timeout` passes."""
        if isinstance(ch, ChanProxy):
            ch.ensure()
        since = self.mark(conn)
        ch._impl._send_method(method, content)
        if not replies:
            return None  # asynchronous method: the caller follows it with a barrier
        deadline = time.monotonic() + timeout
        while True:
            for e in self.entries(conn, since, ch):
                if e["method"].NAME in replies:
                    return e["method"]
            if ch.is_closed and isinstance(ch._closing_reason,
                                           pika.exceptions.ChannelClosedByBroker):
                raise ch._closing_reason
            left = deadline - time.monotonic()
            if left <= 0:
                return {"m": "no reply"}
            conn.process_data_events(time_limit=min(left, 0.05))

    def consume(self, conn, ch, queue, consumer_tag="", auto_ack=False, exclusive=False,
                arguments=None):
        """basic.consume sent raw: deliveries are read from the tap, and pika keeps no consumer
        state (which would nack or reject pending deliveries on its own at close)."""
        r = self.raw(conn, ch, spec_basic().Consume(queue=queue, consumer_tag=consumer_tag,
                                                    no_ack=auto_ack, exclusive=exclusive,
                                                    arguments=arguments or {}),
                     replies=("Basic.ConsumeOk",))
        return r.consumer_tag if hasattr(r, "consumer_tag") else r

    def cancel(self, conn, ch, consumer_tag):
        return self.raw(conn, ch, spec_basic().Cancel(consumer_tag=consumer_tag),
                        replies=("Basic.CancelOk",))

    # clean-up -----------------------------------------------------------------------------
    def cleanup(self):
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, 10)
        try:
            for c in self.conns:
                try:
                    if c.is_open:
                        c.close()
                except Exception:
                    _drop(c)
            if not self.names:
                return
            c = pika.BlockingConnection(self.params())
            ch = c.channel()
            for n in self.names:
                for op in (lambda: ch.queue_delete(n), lambda: ch.exchange_delete(n)):
                    try:
                        op()
                    except pika.exceptions.ChannelClosedByBroker:
                        ch = c.channel()
            c.close()
        except Exception:
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def spec_basic():
    return pika.spec.Basic


class ConnProxy:
    def __init__(self, ctx, kw):
        self._ctx = ctx
        self._kw = kw
        self._real = ctx._open(**kw)

    def channel(self):
        if not self._real.is_open:
            self._real = self._ctx._open(**self._kw)
        return ChanProxy(self, self._ctx.guarded(self._real.channel, "channel.open"))

    def __getattr__(self, name):
        return getattr(self._real, name)


class ChanProxy:
    """A channel that is opened again (on the same connection, or a new one if that was
    closed) when used after the broker closed it."""
    _PASS = frozenset(("is_closed", "is_open", "_closing_reason", "channel_number", "_impl",
                       "close"))

    def __init__(self, conn, real):
        self._conn = conn
        self._real = real

    def ensure(self):
        if self._real.is_closed:
            self._real = self._conn.channel()._real

    def __getattr__(self, name):
        if name not in self._PASS:
            self.ensure()
        return getattr(self._real, name)


def _drop(c):
    try:
        sock = c._impl._transport._sock
        sock.close()
    except Exception:
        pass
