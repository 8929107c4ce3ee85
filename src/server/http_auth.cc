#include "server/http_auth.h"

#include <future>
#include <memory>
#include <string_view>

#include "common/base64.h"
#include "net/address.h"
#include "server/login.h"

namespace wharf::server {
namespace {

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

HttpAuth::Answer Refuse(int status, std::string reason, std::string user = "") {
  return HttpAuth::Answer{status, std::move(reason), std::move(user), false};
}

}  // namespace

HttpAuth::Answer HttpAuth::Check(const Request& request) const {
  Answer answer = Authenticate(request);
  if (answer.status != 200) return answer;
  Status tagged = users_->AccessOf(answer.user)->CheckTag(broker::kMonitoringTags, "read metrics");
  if (!tagged.ok()) return Refuse(403, std::string(tagged.message()), answer.user);
  return answer;
}

HttpAuth::Answer HttpAuth::Authenticate(const Request& request) const {
  if (!request.certificate_user.empty()) {
    auto known = users_->Find(request.certificate_user);
    // The built-in guest is never reachable by certificate (server/login.cc, StartExternal).
    if (known && known->source != "builtin") {
      return Answer{200, "", request.certificate_user, false};
    }
    if (request.authorization.empty()) {
      return Refuse(401,
                    "the client certificate names '" + request.certificate_user +
                        "', which is not a user of this broker",
                    request.certificate_user);
    }
  }
  if (request.authorization.empty()) {
    return Refuse(401, "credentials required (HTTP Basic, a broker user)");
  }
  // RFC 7617: "Basic" (any case), one space, base64 of user:password.
  std::string_view value = request.authorization;
  if (!StartsWithNoCase(value, "basic ")) {
    return Refuse(401, "only HTTP Basic credentials are taken");
  }
  value.remove_prefix(6);
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  auto decoded = Base64Decode(value);
  const size_t colon = decoded ? decoded->find(':') : std::string::npos;
  if (colon == std::string::npos) {
    return Refuse(401, "the Basic credentials are not base64 of user:password");
  }
  std::string user = decoded->substr(0, colon);
  return CheckPassword(user, decoded->substr(colon + 1), request.peer_address);
}

HttpAuth::Answer HttpAuth::CheckPassword(const std::string& user, std::string password,
                                         const std::string& peer_address) const {
  // As a protocol login: every check waits its turn behind this address's failures. An HTTP
  // worker does not wait for it, it answers 429 (zero wait allowed).
  const auto now = std::chrono::steady_clock::now();
  if (!throttle_->Admit(peer_address, now, std::chrono::milliseconds(0))) {
    return Refuse(429, "too many failed logins from " + peer_address + "; try again later", user);
  }
  auto known = users_->Find(user);
  Answer answer;
  answer.user = user;
  if (known && known->source == "builtin") {
    Status guest = CheckBuiltinGuest(user, password, net::IsLoopback(peer_address));
    if (!guest.ok()) {
      answer = Refuse(guest.code() == StatusCode::kAccessRefused ? 403 : 401,
                      std::string(guest.message()), user);
    }
  } else if (known && verified_.Verified(user, password, known->password_hash, now)) {
    // Checked less than a minute ago, against the hash it still has: a success as any other
    // (it clears the address's failures below).
  } else {
    // An unknown user is checked against the dummy hash: the same time, the same answer.
    const std::string stored = known ? known->password_hash : std::string();
    auto matched = std::make_shared<std::promise<bool>>();
    auto result = matched->get_future();
    if (!checker_->Submit(password, stored,
                          [matched](bool matches) { matched->set_value(matches); })) {
      return Refuse(503, "the broker is busy checking other logins; try again later", user);
    }
    if (result.wait_for(kCheckTimeout) != std::future_status::ready) {
      return Refuse(503, "the password check did not finish in time; try again later", user);
    }
    if (!result.get()) {
      answer = Refuse(401, "wrong user name or password", user);
    } else if (known) {
      verified_.Remember(user, password, stored, std::chrono::steady_clock::now());
    }
  }
  if (answer.status == 200) {
    throttle_->Succeeded(peer_address);
  } else {
    throttle_->Failed(peer_address, std::chrono::steady_clock::now());
    answer.failed_login = true;
  }
  return answer;
}

}  // namespace wharf::server
