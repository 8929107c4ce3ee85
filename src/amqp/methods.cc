#include "amqp/methods.h"

#include <array>
#include <concepts>
#include <type_traits>

#include "amqp/wire.h"
#include "common/utf8.h"

namespace wharf::amqp {
namespace {

// Each method's arguments, in wire order, as calls on a visitor: Encoder writes them, Decoder
// reads them. `Of<T> auto& m` takes a T or a const T.
template <class M, class T>
concept Of = std::same_as<std::remove_const_t<M>, T>;

// What RabbitMQ checks for UTF-8 (methods.h) is marked kUtf8.
enum class Text { kAny, kUtf8 };
constexpr Text kUtf8 = Text::kUtf8;
constexpr Text kAny = Text::kAny;

class Encoder {
 public:
  explicit Encoder(std::string* out) : w_(out) {}
  void Octet(const char*, uint8_t v) { w_.Octet(v); }
  void Short(const char*, uint16_t v) { w_.Short(v); }
  void Long(const char*, uint32_t v) { w_.Long(v); }
  void LongLong(const char*, uint64_t v) { w_.LongLong(v); }
  void ShortStr(const char*, const std::string& v, Text) { w_.ShortStr(v); }
  void LongStr(const char*, const std::string& v) { w_.LongStr(v); }
  void Table(const char*, const FieldTable& v) { AppendTable(v, w_.out()); }
  void Bit(const char*, bool v) { w_.Bit(v); }
  void ReservedShort(const char*) { w_.Short(0); }
  void ReservedShortStr(const char*, Text) { w_.ShortStr({}); }
  void ReservedLongStr(const char*) { w_.LongStr({}); }
  void ReservedBit(const char*) { w_.Bit(false); }

 private:
  Writer w_;
};

class Decoder {
 public:
  Decoder(std::string_view args, std::string_view method) : r_(args), method_(method) {}

  void Octet(const char* name, uint8_t& v) { Check(r_.Octet(&v), name); }
  void Short(const char* name, uint16_t& v) { Check(r_.Short(&v), name); }
  void Long(const char* name, uint32_t& v) { Check(r_.Long(&v), name); }
  void LongLong(const char* name, uint64_t& v) { Check(r_.LongLong(&v), name); }
  void ShortStr(const char* name, std::string& v, Text text) {
    std::string_view s;
    if (Check(r_.ShortStr(&s), name) && CheckText(s, text, name)) v.assign(s);
  }
  void LongStr(const char* name, std::string& v) {
    std::string_view s;
    if (Check(r_.LongStr(&s), name)) v.assign(s);
  }
  void Table(const char* name, FieldTable& v) {
    std::string_view s;
    if (!Check(r_.LongStr(&s), name)) return;
    if (Status st = DecodeTable(s, &v); !st.ok() && status_.ok()) {
      status_ =
          Status(st.code(), std::string(method_) + " " + name + ": " + std::string(st.message()));
    }
  }
  void Bit(const char* name, bool& v) { Check(r_.Bit(&v), name); }
  void ReservedShort(const char* name) {
    uint16_t ignored;
    Check(r_.Short(&ignored), name);
  }
  void ReservedShortStr(const char* name, Text text) {
    std::string_view s;
    if (Check(r_.ShortStr(&s), name)) CheckText(s, text, name);
  }
  void ReservedLongStr(const char* name) {
    std::string_view ignored;
    Check(r_.LongStr(&ignored), name);
  }
  void ReservedBit(const char* name) {
    bool ignored;
    Check(r_.Bit(&ignored), name);
  }

  Status Finish() {
    if (status_.ok() && r_.remaining() > 0) {
      status_ = Status(StatusCode::kMalformedFrame, std::string(method_) + ": " +
                                                        std::to_string(r_.remaining()) +
                                                        " bytes after the last argument");
    }
    return status_;
  }

 private:
  bool Check(bool read, const char* name) {
    if (!read && status_.ok()) {
      status_ = Status(StatusCode::kMalformedFrame,
                       std::string(method_) + ": truncated at argument " + name);
    }
    return read && status_.ok();
  }
  bool CheckText(std::string_view s, Text text, const char* name) {
    if (text == Text::kAny || IsValidUtf8(s)) return true;
    if (status_.ok()) {
      status_ = Status(StatusCode::kMalformedFrame,
                       std::string(method_) + ": malformed UTF-8 in shortstr " + name);
    }
    return false;
  }

  Reader r_;
  std::string_view method_;
  Status status_;
};

// Methods without arguments (the empty structs, less those with only reserved arguments).
template <class T>
constexpr bool kOnlyReserved =
    std::is_same_v<T, ConnectionOpenOk> || std::is_same_v<T, ChannelOpen> ||
    std::is_same_v<T, ChannelOpenOk> || std::is_same_v<T, BasicGetEmpty>;
template <class V, class M>
requires(std::is_empty_v<std::remove_const_t<M>> &&
         !kOnlyReserved<std::remove_const_t<M>>) void Fields(V&, M&) {}

// connection
template <class V>
void Fields(V& v, Of<ConnectionStart> auto& m) {
  v.Octet("version-major", m.version_major);
  v.Octet("version-minor", m.version_minor);
  v.Table("server-properties", m.server_properties);
  v.LongStr("mechanisms", m.mechanisms);
  v.LongStr("locales", m.locales);
}
template <class V>
void Fields(V& v, Of<ConnectionStartOk> auto& m) {
  v.Table("client-properties", m.client_properties);
  v.ShortStr("mechanism", m.mechanism, kUtf8);
  v.LongStr("response", m.response);
  v.ShortStr("locale", m.locale, kUtf8);
}
template <class V>
void Fields(V& v, Of<ConnectionSecure> auto& m) {
  v.LongStr("challenge", m.challenge);
}
template <class V>
void Fields(V& v, Of<ConnectionSecureOk> auto& m) {
  v.LongStr("response", m.response);
}
template <class V, class M>
requires Of<M, ConnectionTune> || Of<M, ConnectionTuneOk>
void Fields(V& v, M& m) {
  v.Short("channel-max", m.channel_max);
  v.Long("frame-max", m.frame_max);
  v.Short("heartbeat", m.heartbeat);
}
template <class V>
void Fields(V& v, Of<ConnectionOpen> auto& m) {
  v.ShortStr("virtual-host", m.virtual_host, kUtf8);
  v.ReservedShortStr("capabilities", kUtf8);
  v.ReservedBit("insist");
}
template <class V>
void Fields(V& v, Of<ConnectionOpenOk> auto&) {
  v.ReservedShortStr("known-hosts", kUtf8);
}
template <class V, class M>
requires Of<M, ConnectionClose> || Of<M, ChannelClose>
void Fields(V& v, M& m) {
  v.Short("reply-code", m.reply_code);
  v.ShortStr("reply-text", m.reply_text, kUtf8);
  v.Short("class-id", m.class_id);
  v.Short("method-id", m.method_id);
}
template <class V>
void Fields(V& v, Of<ConnectionBlocked> auto& m) {
  v.ShortStr("reason", m.reason, kUtf8);
}
template <class V>
void Fields(V& v, Of<ConnectionUpdateSecret> auto& m) {
  v.LongStr("new-secret", m.new_secret);
  v.ShortStr("reason", m.reason, kUtf8);
}

// channel
template <class V>
void Fields(V& v, Of<ChannelOpen> auto&) {
  v.ReservedShortStr("out-of-band", kUtf8);
}
template <class V>
void Fields(V& v, Of<ChannelOpenOk> auto&) {
  v.ReservedLongStr("channel-id");
}
template <class V, class M>
requires Of<M, ChannelFlow> || Of<M, ChannelFlowOk>
void Fields(V& v, M& m) { v.Bit("active", m.active); }

// access
template <class V>
void Fields(V& v, Of<AccessRequest> auto& m) {
  v.ShortStr("realm", m.realm, kUtf8);
  v.Bit("exclusive", m.exclusive);
  v.Bit("passive", m.passive);
  v.Bit("active", m.active);
  v.Bit("write", m.write);
  v.Bit("read", m.read);
}
template <class V>
void Fields(V& v, Of<AccessRequestOk> auto& m) {
  v.Short("ticket", m.ticket);
}

// exchange
template <class V>
void Fields(V& v, Of<ExchangeDeclare> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("exchange", m.exchange, kUtf8);
  v.ShortStr("type", m.type, kUtf8);
  v.Bit("passive", m.passive);
  v.Bit("durable", m.durable);
  v.Bit("auto-delete", m.auto_delete);
  v.Bit("internal", m.internal);
  v.Bit("no-wait", m.no_wait);
  v.Table("arguments", m.arguments);
}
template <class V>
void Fields(V& v, Of<ExchangeDelete> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("exchange", m.exchange, kUtf8);
  v.Bit("if-unused", m.if_unused);
  v.Bit("no-wait", m.no_wait);
}
template <class V, class M>
requires Of<M, ExchangeBind> || Of<M, ExchangeUnbind>
void Fields(V& v, M& m) {
  v.ReservedShort("ticket");
  v.ShortStr("destination", m.destination, kUtf8);
  v.ShortStr("source", m.source, kUtf8);
  v.ShortStr("routing-key", m.routing_key, kUtf8);
  v.Bit("no-wait", m.no_wait);
  v.Table("arguments", m.arguments);
}

// queue
template <class V>
void Fields(V& v, Of<QueueDeclare> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("queue", m.queue, kUtf8);
  v.Bit("passive", m.passive);
  v.Bit("durable", m.durable);
  v.Bit("exclusive", m.exclusive);
  v.Bit("auto-delete", m.auto_delete);
  v.Bit("no-wait", m.no_wait);
  v.Table("arguments", m.arguments);
}
template <class V>
void Fields(V& v, Of<QueueDeclareOk> auto& m) {
  v.ShortStr("queue", m.queue, kUtf8);
  v.Long("message-count", m.message_count);
  v.Long("consumer-count", m.consumer_count);
}
template <class V>
void Fields(V& v, Of<QueueBind> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("queue", m.queue, kUtf8);
  v.ShortStr("exchange", m.exchange, kUtf8);
  v.ShortStr("routing-key", m.routing_key, kUtf8);
  v.Bit("no-wait", m.no_wait);
  v.Table("arguments", m.arguments);
}
template <class V>
void Fields(V& v, Of<QueuePurge> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("queue", m.queue, kUtf8);
  v.Bit("no-wait", m.no_wait);
}
template <class V, class M>
requires Of<M, QueuePurgeOk> || Of<M, QueueDeleteOk>
void Fields(V& v, M& m) { v.Long("message-count", m.message_count); }
template <class V>
void Fields(V& v, Of<QueueDelete> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("queue", m.queue, kUtf8);
  v.Bit("if-unused", m.if_unused);
  v.Bit("if-empty", m.if_empty);
  v.Bit("no-wait", m.no_wait);
}
template <class V>
void Fields(V& v, Of<QueueUnbind> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("queue", m.queue, kUtf8);
  v.ShortStr("exchange", m.exchange, kUtf8);
  v.ShortStr("routing-key", m.routing_key, kUtf8);
  v.Table("arguments", m.arguments);
}

// basic
template <class V>
void Fields(V& v, Of<BasicQos> auto& m) {
  v.Long("prefetch-size", m.prefetch_size);
  v.Short("prefetch-count", m.prefetch_count);
  v.Bit("global", m.global);
}
template <class V>
void Fields(V& v, Of<BasicConsume> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("queue", m.queue, kUtf8);
  v.ShortStr("consumer-tag", m.consumer_tag, kUtf8);
  v.Bit("no-local", m.no_local);
  v.Bit("no-ack", m.no_ack);
  v.Bit("exclusive", m.exclusive);
  v.Bit("no-wait", m.no_wait);
  v.Table("arguments", m.arguments);
}
template <class V, class M>
requires Of<M, BasicConsumeOk> || Of<M, BasicCancelOk>
void Fields(V& v, M& m) { v.ShortStr("consumer-tag", m.consumer_tag, kUtf8); }
template <class V>
void Fields(V& v, Of<BasicCancel> auto& m) {
  v.ShortStr("consumer-tag", m.consumer_tag, kUtf8);
  v.Bit("no-wait", m.no_wait);
}
template <class V>
void Fields(V& v, Of<BasicPublish> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("exchange", m.exchange, kAny);
  v.ShortStr("routing-key", m.routing_key, kAny);
  v.Bit("mandatory", m.mandatory);
  v.Bit("immediate", m.immediate);
}
template <class V>
void Fields(V& v, Of<BasicReturn> auto& m) {
  v.Short("reply-code", m.reply_code);
  v.ShortStr("reply-text", m.reply_text, kAny);
  v.ShortStr("exchange", m.exchange, kAny);
  v.ShortStr("routing-key", m.routing_key, kAny);
}
template <class V>
void Fields(V& v, Of<BasicDeliver> auto& m) {
  v.ShortStr("consumer-tag", m.consumer_tag, kAny);
  v.LongLong("delivery-tag", m.delivery_tag);
  v.Bit("redelivered", m.redelivered);
  v.ShortStr("exchange", m.exchange, kAny);
  v.ShortStr("routing-key", m.routing_key, kAny);
}
template <class V>
void Fields(V& v, Of<BasicGet> auto& m) {
  v.ReservedShort("ticket");
  v.ShortStr("queue", m.queue, kUtf8);
  v.Bit("no-ack", m.no_ack);
}
template <class V>
void Fields(V& v, Of<BasicGetOk> auto& m) {
  v.LongLong("delivery-tag", m.delivery_tag);
  v.Bit("redelivered", m.redelivered);
  v.ShortStr("exchange", m.exchange, kAny);
  v.ShortStr("routing-key", m.routing_key, kAny);
  v.Long("message-count", m.message_count);
}
template <class V>
void Fields(V& v, Of<BasicGetEmpty> auto&) {
  v.ReservedShortStr("cluster-id", kUtf8);
}
template <class V>
void Fields(V& v, Of<BasicAck> auto& m) {
  v.LongLong("delivery-tag", m.delivery_tag);
  v.Bit("multiple", m.multiple);
}
template <class V>
void Fields(V& v, Of<BasicReject> auto& m) {
  v.LongLong("delivery-tag", m.delivery_tag);
  v.Bit("requeue", m.requeue);
}
template <class V, class M>
requires Of<M, BasicRecoverAsync> || Of<M, BasicRecover>
void Fields(V& v, M& m) { v.Bit("requeue", m.requeue); }
template <class V>
void Fields(V& v, Of<BasicNack> auto& m) {
  v.LongLong("delivery-tag", m.delivery_tag);
  v.Bit("multiple", m.multiple);
  v.Bit("requeue", m.requeue);
}

// confirm
template <class V>
void Fields(V& v, Of<ConfirmSelect> auto& m) {
  v.Bit("nowait", m.nowait);
}

constexpr uint32_t Key(uint16_t class_id, uint16_t method_id) {
  return (uint32_t{class_id} << 16) | method_id;
}

using DecodeFn = Status (*)(std::string_view args, Method* out);

template <class T>
Status DecodeAs(std::string_view args, Method* out) {
  T m;
  Decoder d(args, T::kName);
  Fields(d, m);
  WHARF_RETURN_IF_ERROR(d.Finish());
  out->emplace<T>(std::move(m));
  return Status::Ok();
}

struct Entry {
  uint32_t key;
  std::string_view name;
  DecodeFn decode;
  bool content;
};

template <class T>
constexpr bool kHasContent = std::is_same_v<T, BasicPublish> || std::is_same_v<T, BasicReturn> ||
                             std::is_same_v<T, BasicDeliver> || std::is_same_v<T, BasicGetOk>;

template <size_t... I>
constexpr auto MakeEntries(std::index_sequence<I...>) {
  return std::array<Entry, sizeof...(I)>{
      Entry{Key(std::variant_alternative_t<I, Method>::kClassId,
                std::variant_alternative_t<I, Method>::kMethodId),
            std::variant_alternative_t<I, Method>::kName,
            &DecodeAs<std::variant_alternative_t<I, Method>>,
            kHasContent<std::variant_alternative_t<I, Method>>}...};
}

// Every method, in the variant's order (index = Method::index()).
constexpr auto kEntries = MakeEntries(std::make_index_sequence<std::variant_size_v<Method>>());

const Entry* FindEntry(uint16_t class_id, uint16_t method_id) {
  const uint32_t key = Key(class_id, method_id);
  for (const Entry& e : kEntries) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

}  // namespace

Status DecodeMethod(std::string_view payload, Method* out) {
  if (payload.size() < 4) {
    return Status(StatusCode::kMalformedFrame, "method frame payload of " +
                                                   std::to_string(payload.size()) +
                                                   " bytes has no class and method id");
  }
  const uint16_t class_id = LoadU16(payload.data());
  const uint16_t method_id = LoadU16(payload.data() + 2);
  const Entry* e = FindEntry(class_id, method_id);
  if (e == nullptr) {
    return Status(StatusCode::kInvalidArgument, "unknown method: class " +
                                                    std::to_string(class_id) + ", method " +
                                                    std::to_string(method_id));
  }
  return e->decode(payload.substr(4), out);
}

void EncodeMethod(const Method& method, std::string* payload) {
  std::visit(
      [payload](const auto& m) {
        using T = std::remove_cvref_t<decltype(m)>;
        Writer w(payload);
        w.Short(T::kClassId);
        w.Short(T::kMethodId);
        Encoder e(payload);
        Fields(e, m);
      },
      method);
}

std::pair<uint16_t, uint16_t> MethodId(const Method& m) {
  return std::visit(
      [](const auto& x) {
        using T = std::remove_cvref_t<decltype(x)>;
        return std::pair<uint16_t, uint16_t>(T::kClassId, T::kMethodId);
      },
      m);
}

std::string_view MethodName(uint16_t class_id, uint16_t method_id) {
  const Entry* e = FindEntry(class_id, method_id);
  return e == nullptr ? std::string_view("unknown") : e->name;
}

std::string_view MethodName(const Method& m) {
  return m.valueless_by_exception() ? std::string_view("unknown") : kEntries[m.index()].name;
}

bool HasContent(const Method& m) {
  return !m.valueless_by_exception() && kEntries[m.index()].content;
}

bool HasContent(uint16_t class_id, uint16_t method_id) {
  const Entry* e = FindEntry(class_id, method_id);
  return e != nullptr && e->content;
}

}  // namespace wharf::amqp
