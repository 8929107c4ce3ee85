// Unit tests for server/http_auth.h: the HTTP listeners' credentials, checked as a protocol
// login is (real PBKDF2 on a LoginChecker thread, the real throttle).
#include "server/http_auth.h"

#include <gtest/gtest.h>

#include "common/base64.h"
#include "common/password.h"

namespace wharf::server {
namespace {

class HttpAuthTest : public ::testing::Test {
 protected:
  HttpAuthTest() : users_(Options(), {}), checker_(1, 1), throttle_(Limits()) {}

  static ServerOptions Options() {
    ServerOptions options;
    options.users["alice"] = HashPassword("s3cret", 1000);
    // An ordinary user: neither monitoring nor administrator.
    options.users["bob"] = HashPassword("s3cret", 1000);
    options.user_tags["bob"] = {"management"};
    return options;
  }
  static LoginThrottle::Limits Limits() {
    LoginThrottle::Limits limits;
    limits.base_delay = std::chrono::milliseconds(60'000);
    return limits;
  }
  static std::string Basic(const std::string& user, const std::string& password) {
    return "Basic " + Base64Encode(user + ":" + password);
  }
  HttpAuth::Answer Check(const std::string& authorization, const std::string& peer = "127.0.0.1",
                         const std::string& certificate_user = "") {
    return auth_.Check(HttpAuth::Request{authorization, certificate_user, peer});
  }

  UserDirectory users_;
  LoginChecker checker_;
  LoginThrottle throttle_;
  HttpAuth auth_{&users_, &checker_, &throttle_};
};

TEST_F(HttpAuthTest, AUsersPasswordIsTakenAndAWrongOneIsNot) {
  HttpAuth::Answer ok = Check(Basic("alice", "s3cret"), "10.1.2.3");
  EXPECT_EQ(ok.status, 200) << ok.reason;
  EXPECT_EQ(ok.user, "alice");
  // The scheme's name in any case, spaces around the credentials.
  EXPECT_EQ(Check("bAsIc   " + Base64Encode("alice:s3cret") + " ", "10.1.2.3").status, 200);
  // A password may hold colons: the first one ends the name.
  HttpAuth::Answer wrong = Check(Basic("alice", "s3cret:x"), "10.1.2.4");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(wrong.reason, "wrong user name or password");
  EXPECT_TRUE(wrong.failed_login);
  EXPECT_FALSE(ok.failed_login);
  EXPECT_EQ(Check(Basic("nobody", "s3cret"), "10.1.2.5").status, 401);
}

// A password that passed is remembered (server/credential_cache.h), but only against the hash
// it passed: a changed password, or a deleted user, is checked again at once.
TEST_F(HttpAuthTest, AChangedPasswordOrADeletedUserIsCheckedAgainAtOnce) {
  auto carol = [](const std::string& password) {
    return store::StoredUser{"carol", HashPassword(password, 1000), false, {}, {"monitoring"}, {}};
  };
  users_.Put(carol("old"));
  EXPECT_EQ(Check(Basic("carol", "old"), "10.9.0.1").status, 200);
  EXPECT_EQ(Check(Basic("carol", "old"), "10.9.0.1").status, 200);
  users_.Put(carol("new"));
  EXPECT_EQ(Check(Basic("carol", "old"), "10.9.0.2").status, 401);
  EXPECT_EQ(Check(Basic("carol", "new"), "10.9.0.3").status, 200);
  users_.Remove("carol");
  EXPECT_EQ(Check(Basic("carol", "new"), "10.9.0.4").status, 401);
}

TEST_F(HttpAuthTest, AUserWithoutTheMonitoringOrAdministratorTagIs403) {
  HttpAuth::Answer refused = Check(Basic("bob", "s3cret"));
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.reason,
            "user 'bob' may not read metrics: it needs the tag monitoring or administrator");
  EXPECT_FALSE(refused.failed_login) << "the password was right";
}

TEST_F(HttpAuthTest, MissingOrMalformedCredentialsAre401SayingWhy) {
  EXPECT_NE(Check("").reason.find("credentials required"), std::string::npos);
  EXPECT_NE(Check("Bearer abc").reason.find("only HTTP Basic"), std::string::npos);
  EXPECT_NE(Check("Basic ***").reason.find("not base64 of user:password"), std::string::npos);
  EXPECT_NE(Check("Basic " + Base64Encode("alice")).reason.find("not base64 of user:password"),
            std::string::npos);
  EXPECT_EQ(Check("Basic").status, 401);
  EXPECT_FALSE(Check("Bearer abc").failed_login);
  // None of these counted as a failed login: the address is not throttled.
  EXPECT_EQ(throttle_.size(), 0u);
}

TEST_F(HttpAuthTest, GuestOnlyFromLoopbackAddressesIncludingMappedOnes) {
  EXPECT_EQ(Check(Basic("guest", "guest"), "127.0.0.1").status, 200);
  EXPECT_EQ(Check(Basic("guest", "guest"), "::1").status, 200);
  EXPECT_EQ(Check(Basic("guest", "guest"), "::ffff:127.0.0.1").status, 200);
  HttpAuth::Answer afar = Check(Basic("guest", "guest"), "192.0.2.7");
  EXPECT_EQ(afar.status, 403);
  EXPECT_EQ(afar.reason, "user 'guest' may only connect from a loopback address");
  EXPECT_EQ(Check(Basic("guest", "guest"), "::ffff:192.0.2.8").status, 403);
  EXPECT_EQ(Check(Basic("guest", "wrong"), "127.0.0.2").status, 401);
}

TEST_F(HttpAuthTest, AFailureThrottlesItsAddressWith429AndOthersCarryOn) {
  ASSERT_EQ(Check(Basic("alice", "wrong"), "198.51.100.1").status, 401);
  HttpAuth::Answer throttled = Check(Basic("alice", "s3cret"), "198.51.100.1");
  EXPECT_EQ(throttled.status, 429);
  EXPECT_EQ(throttled.reason, "too many failed logins from 198.51.100.1; try again later");
  EXPECT_EQ(Check(Basic("alice", "s3cret"), "198.51.100.2").status, 200);
}

TEST_F(HttpAuthTest, AVerifiedCertificateNamingAUserStandsInForThePassword) {
  EXPECT_EQ(Check("", "192.0.2.1", "alice").status, 200);
  // Never guest; a name no user has is refused by name, unless a password comes with it.
  EXPECT_EQ(Check("", "127.0.0.1", "guest").status, 401);
  HttpAuth::Answer unknown = Check("", "192.0.2.1", "mallory");
  EXPECT_EQ(unknown.status, 401);
  EXPECT_EQ(unknown.reason,
            "the client certificate names 'mallory', which is not a user of this "
            "broker");
  EXPECT_EQ(Check(Basic("alice", "s3cret"), "192.0.2.1", "mallory").status, 200);
}

}  // namespace
}  // namespace wharf::server
