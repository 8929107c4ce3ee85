#include "amqp/field_table.h"

#include <bit>
#include <cstring>
#include <limits>

#include "amqp/wire.h"
#include "common/log_safe.h"

namespace wharf::amqp {
namespace {

Status Malformed(std::string_view what) {
  return Status(StatusCode::kMalformedFrame, "malformed field table: " + std::string(what));
}

std::string Letter(char type) {
  const auto c = static_cast<unsigned char>(type);
  if (c >= 0x21 && c < 0x7F) return "'" + std::string(1, type) + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("0x") + kHex[c >> 4] + kHex[c & 0xF];
}

Status DecodeEntries(std::string_view bytes, int depth, FieldTable* out);
Status DecodeArray(std::string_view bytes, int depth, std::string_view key, FieldArray* out);

// Reads one value of letter `type` from `r`. `key` names the entry, for errors.
Status DecodeValue(Reader& r, char type, int depth, std::string_view key, FieldValue* out) {
  auto truncated = [&] {
    return Malformed("the value of " + QuotedForDisplay(key, 64) + " (type " + Letter(type) +
                     ") is truncated");
  };
  out->type = type;
  switch (type) {
    case 't': {
      uint8_t v;
      if (!r.Octet(&v)) return truncated();
      out->value = v != 0;
      return Status::Ok();
    }
    case 'b': {
      uint8_t v;
      if (!r.Octet(&v)) return truncated();
      out->value = int64_t{static_cast<int8_t>(v)};
      return Status::Ok();
    }
    case 'B': {
      uint8_t v;
      if (!r.Octet(&v)) return truncated();
      out->value = uint64_t{v};
      return Status::Ok();
    }
    case 's':
    case 'U': {
      uint16_t v;
      if (!r.Short(&v)) return truncated();
      out->type = 's';
      out->value = int64_t{static_cast<int16_t>(v)};
      return Status::Ok();
    }
    case 'u': {
      uint16_t v;
      if (!r.Short(&v)) return truncated();
      out->value = uint64_t{v};
      return Status::Ok();
    }
    case 'I': {
      uint32_t v;
      if (!r.Long(&v)) return truncated();
      out->value = int64_t{static_cast<int32_t>(v)};
      return Status::Ok();
    }
    case 'i': {
      uint32_t v;
      if (!r.Long(&v)) return truncated();
      out->value = uint64_t{v};
      return Status::Ok();
    }
    case 'l':
    case 'L': {
      uint64_t v;
      if (!r.LongLong(&v)) return truncated();
      out->value = static_cast<int64_t>(v);
      return Status::Ok();
    }
    case 'T': {
      uint64_t v;
      if (!r.LongLong(&v)) return truncated();
      out->value = v;
      return Status::Ok();
    }
    case 'f': {
      uint32_t v;
      if (!r.Long(&v)) return truncated();
      out->value = std::bit_cast<float>(v);
      return Status::Ok();
    }
    case 'd': {
      uint64_t v;
      if (!r.LongLong(&v)) return truncated();
      out->value = std::bit_cast<double>(v);
      return Status::Ok();
    }
    case 'D': {
      Decimal d;
      if (!r.Octet(&d.scale) || !r.Long(&d.value)) return truncated();
      out->value = d;
      return Status::Ok();
    }
    case 'S':
    case 'x': {
      std::string_view v;
      if (!r.LongStr(&v)) return truncated();
      out->value = std::string(v);
      return Status::Ok();
    }
    case 'F':
    case 'A': {
      std::string_view v;
      if (!r.LongStr(&v)) return truncated();
      if (depth + 1 > kMaxFieldDepth) {
        return Malformed("tables and arrays nested deeper than " + std::to_string(kMaxFieldDepth) +
                         " levels");
      }
      if (type == 'F') {
        FieldTable table;
        WHARF_RETURN_IF_ERROR(DecodeEntries(v, depth + 1, &table));
        out->value = std::move(table);
      } else {
        FieldArray array;
        WHARF_RETURN_IF_ERROR(DecodeArray(v, depth + 1, key, &array));
        out->value = std::move(array);
      }
      return Status::Ok();
    }
    case 'V':
      out->value = std::monostate();
      return Status::Ok();
    default:
      return Malformed("unknown field type " + Letter(type) + " for " + QuotedForDisplay(key, 64));
  }
}

Status DecodeEntries(std::string_view bytes, int depth, FieldTable* out) {
  Reader r(bytes);
  while (r.remaining() > 0) {
    std::string_view key;
    if (!r.ShortStr(&key)) return Malformed("a field name is truncated");
    uint8_t type;
    if (!r.Octet(&type))
      return Malformed("the type of " + QuotedForDisplay(key, 64) + " is missing");
    FieldValue value;
    WHARF_RETURN_IF_ERROR(DecodeValue(r, static_cast<char>(type), depth, key, &value));
    out->entries.emplace_back(std::string(key), std::move(value));
  }
  return Status::Ok();
}

Status DecodeArray(std::string_view bytes, int depth, std::string_view key, FieldArray* out) {
  Reader r(bytes);
  while (r.remaining() > 0) {
    uint8_t type;
    if (!r.Octet(&type)) return Malformed("an array value's type is missing");
    FieldValue value;
    WHARF_RETURN_IF_ERROR(DecodeValue(r, static_cast<char>(type), depth, key, &value));
    out->push_back(std::move(value));
  }
  return Status::Ok();
}

// The integer in either integer alternative (0 otherwise), as the letter's bits.
uint64_t IntegerBits(const FieldValue& v) {
  if (const auto* s = std::get_if<int64_t>(&v.value)) return static_cast<uint64_t>(*s);
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return *u;
  if (const auto* b = std::get_if<bool>(&v.value)) return *b ? 1 : 0;
  return 0;
}

void AppendArrayContent(const FieldArray& array, Writer& w);
void AppendTableContent(const FieldTable& table, Writer& w);

void AppendValue(const FieldValue& v, Writer& w) {
  switch (v.type) {
    case 't':
      w.Octet(IntegerBits(v) != 0 ? 1 : 0);
      return;
    case 'b':
    case 'B':
      w.Octet(static_cast<uint8_t>(IntegerBits(v)));
      return;
    case 's':
    case 'u':
      w.Short(static_cast<uint16_t>(IntegerBits(v)));
      return;
    case 'I':
    case 'i':
      w.Long(static_cast<uint32_t>(IntegerBits(v)));
      return;
    case 'l':
    case 'L':
    case 'T':
      w.LongLong(IntegerBits(v));
      return;
    case 'f': {
      const auto* f = std::get_if<float>(&v.value);
      w.Long(f ? std::bit_cast<uint32_t>(*f) : 0);
      return;
    }
    case 'd': {
      const auto* d = std::get_if<double>(&v.value);
      w.LongLong(d ? std::bit_cast<uint64_t>(*d) : 0);
      return;
    }
    case 'D': {
      const auto* d = std::get_if<Decimal>(&v.value);
      w.Octet(d ? d->scale : 0);
      w.Long(d ? d->value : 0);
      return;
    }
    case 'S':
    case 'x': {
      const auto* s = std::get_if<std::string>(&v.value);
      w.LongStr(s ? std::string_view(*s) : std::string_view());
      return;
    }
    case 'F': {
      const size_t at = w.BeginLength();
      if (const auto* t = std::get_if<FieldTable>(&v.value)) AppendTableContent(*t, w);
      w.EndLength(at);
      return;
    }
    case 'A': {
      const size_t at = w.BeginLength();
      if (const auto* a = std::get_if<FieldArray>(&v.value)) AppendArrayContent(*a, w);
      w.EndLength(at);
      return;
    }
    default:  // 'V', and an unknown letter (written as V: see the header)
      return;
  }
}

// The letter actually written for `v`.
char WrittenLetter(const FieldValue& v) {
  static constexpr std::string_view kKnown = "tbBsuIilLfdDSxTFAV";
  return kKnown.find(v.type) == std::string_view::npos ? 'V' : v.type;
}

void AppendTableContent(const FieldTable& table, Writer& w) {
  for (const auto& [key, value] : table.entries) {
    w.ShortStr(key);
    w.Octet(static_cast<uint8_t>(WrittenLetter(value)));
    AppendValue(value, w);
  }
}

void AppendArrayContent(const FieldArray& array, Writer& w) {
  for (const FieldValue& value : array) {
    w.Octet(static_cast<uint8_t>(WrittenLetter(value)));
    AppendValue(value, w);
  }
}

bool IsSignedLetter(char type) {
  return std::string_view("bsIlL").find(type) != std::string_view::npos;
}
bool IsUnsignedLetter(char type) {
  return std::string_view("BuiT").find(type) != std::string_view::npos;
}

}  // namespace

const FieldValue* FieldTable::Find(std::string_view key) const {
  for (const auto& entry : entries) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

FieldValue* FieldTable::Find(std::string_view key) {
  for (auto& entry : entries) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void FieldTable::Set(std::string key, FieldValue v) {
  auto it = entries.begin();
  while (it != entries.end() && it->first != key) ++it;
  if (it == entries.end()) {
    entries.emplace_back(std::move(key), std::move(v));
    return;
  }
  it->second = std::move(v);
  const std::string_view name = it->first;
  for (auto later = it + 1; later != entries.end();) {
    later = later->first == name ? entries.erase(later) : later + 1;
  }
}

void FieldTable::Erase(std::string_view key) {
  std::erase_if(entries, [key](const auto& entry) { return entry.first == key; });
}

FieldValue FieldValue::Bool(bool v) { return FieldValue{'t', v}; }

FieldValue FieldValue::Int(char type, int64_t v) {
  if (IsUnsignedLetter(type)) return FieldValue{type, static_cast<uint64_t>(v)};
  return FieldValue{type, v};
}

FieldValue FieldValue::UInt(char type, uint64_t v) {
  if (IsSignedLetter(type)) return FieldValue{type, static_cast<int64_t>(v)};
  return FieldValue{type, v};
}

FieldValue FieldValue::LongStr(std::string v) { return FieldValue{'S', std::move(v)}; }
FieldValue FieldValue::ByteArray(std::string v) { return FieldValue{'x', std::move(v)}; }
FieldValue FieldValue::Timestamp(uint64_t seconds) { return FieldValue{'T', seconds}; }
FieldValue FieldValue::Table(FieldTable v) { return FieldValue{'F', std::move(v)}; }
FieldValue FieldValue::Array(FieldArray v) { return FieldValue{'A', std::move(v)}; }
FieldValue FieldValue::Void() { return FieldValue{'V', std::monostate()}; }
FieldValue FieldValue::Float(float v) { return FieldValue{'f', v}; }
FieldValue FieldValue::Double(double v) { return FieldValue{'d', v}; }
FieldValue FieldValue::Dec(Decimal v) { return FieldValue{'D', v}; }

std::optional<int64_t> FieldValue::AsInt() const {
  if (!IsSignedLetter(type) && (!IsUnsignedLetter(type) || type == 'T')) return std::nullopt;
  if (const auto* s = std::get_if<int64_t>(&value)) return *s;
  if (const auto* u = std::get_if<uint64_t>(&value)) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(*u);
    }
  }
  return std::nullopt;
}

const std::string* FieldValue::AsString() const {
  if (type != 'S' && type != 'x') return nullptr;
  return std::get_if<std::string>(&value);
}

std::optional<bool> FieldValue::AsBool() const {
  if (type != 't') return std::nullopt;
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  return std::nullopt;
}

const FieldTable* FieldValue::AsTable() const {
  return type == 'F' ? std::get_if<FieldTable>(&value) : nullptr;
}

const FieldArray* FieldValue::AsArray() const {
  return type == 'A' ? std::get_if<FieldArray>(&value) : nullptr;
}

bool operator==(const FieldValue& a, const FieldValue& b) {
  return a.type == b.type && a.value == b.value;
}

Status DecodeTable(std::string_view bytes, FieldTable* out) {
  FieldTable table;
  WHARF_RETURN_IF_ERROR(DecodeEntries(bytes, 0, &table));
  *out = std::move(table);
  return Status::Ok();
}

void AppendTable(const FieldTable& table, std::string* out) {
  Writer w(out);
  const size_t at = w.BeginLength();
  AppendTableContent(table, w);
  w.EndLength(at);
}

}  // namespace wharf::amqp
