#include "amqp/sasl.h"

#include "amqp/field_table.h"

namespace wharf::amqp {
namespace {

Status Refused(std::string_view what) {
  return Status(StatusCode::kAuthenticationFailed, std::string(what));
}

}  // namespace

Status ParsePlain(std::string_view response, Credentials* out) {
  const size_t first = response.find('\0');
  if (first == std::string_view::npos) {
    return Refused("PLAIN response invalid: no NUL separator");
  }
  const size_t second = response.find('\0', first + 1);
  if (second == std::string_view::npos) {
    return Refused("PLAIN response invalid: one NUL separator, two expected");
  }
  if (response.find('\0', second + 1) != std::string_view::npos) {
    return Refused("PLAIN response invalid: more than two NUL separators");
  }
  const std::string_view authzid = response.substr(0, first);
  const std::string_view user = response.substr(first + 1, second - first - 1);
  if (!authzid.empty() && authzid != user) {
    return Refused("PLAIN response invalid: authorization identity differs from the user");
  }
  out->user.assign(user);
  out->password.assign(response.substr(second + 1));
  return Status::Ok();
}

Status ParseAmqplain(std::string_view response, Credentials* out) {
  FieldTable table;
  if (Status st = DecodeTable(response, &table); !st.ok()) {
    return Refused("AMQPLAIN response invalid: " + std::string(st.message()));
  }
  const FieldValue* login = table.Find("LOGIN");
  const FieldValue* password = table.Find("PASSWORD");
  if (login == nullptr || password == nullptr || login->type != 'S' || password->type != 'S') {
    return Refused("AMQPLAIN response invalid: LOGIN or PASSWORD (longstr) missing");
  }
  out->user = *login->AsString();
  out->password = *password->AsString();
  return Status::Ok();
}

}  // namespace wharf::amqp
