#include "amqp/erlang_text.h"

namespace wharf::amqp {
namespace {

// The escape ~p writes for a printable control character, or 0.
char Escape(unsigned char c) {
  switch (c) {
    case '\t':
      return 't';
    case '\n':
      return 'n';
    case '\v':
      return 'v';
    case '\f':
      return 'f';
    case '\r':
      return 'r';
    case '\b':
      return 'b';
    case 27:
      return 'e';
    default:
      return 0;
  }
}

bool Printable(std::string_view bytes) {
  for (unsigned char c : bytes) {
    if ((c < 32 || c > 126) && Escape(c) == 0) return false;
  }
  return true;
}

}  // namespace

std::string ErlangBinaryW(std::string_view bytes) {
  std::string out = "<<";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(static_cast<unsigned char>(bytes[i]));
  }
  return out + ">>";
}

std::string ErlangBinaryP(std::string_view bytes) {
  if (bytes.empty() || !Printable(bytes)) return ErlangBinaryW(bytes);
  std::string out = "<<\"";
  for (unsigned char c : bytes) {
    if (char e = Escape(c)) {
      out += '\\';
      out += e;
    } else {
      if (c == '"' || c == '\\') out += '\\';
      out += static_cast<char>(c);
    }
  }
  return out + "\">>";
}

std::string FrameSnippet(uint8_t type, std::string_view payload) {
  const bool all = payload.size() <= 16;
  return "type " + std::to_string(type) + ", " + (all ? "all" : "first 16") +
         " octets = " + ErlangBinaryP(all ? payload : payload.substr(0, 16));
}

std::string_view ErlangTypeName(const FieldValue& value) {
  switch (value.type) {
    case 't':
      return "bool";
    case 'b':
      return "byte";
    case 'B':
      return "unsignedbyte";
    case 's':
      return "short";
    case 'u':
      return "unsignedshort";
    case 'I':
      return "signedint";
    case 'i':
      return "unsignedint";
    case 'l':
    case 'L':
      return "long";
    case 'f':
      return "float";
    case 'd':
      return "double";
    case 'D':
      return "decimal";
    case 'S':
      return "longstr";
    case 'x':
      return "binary";
    case 'T':
      return "timestamp";
    case 'F':
      return "table";
    case 'A':
      return "array";
    default:
      return "void";
  }
}

}  // namespace wharf::amqp
