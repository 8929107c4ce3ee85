// Unit tests for broker/access.h (a user's rights, RabbitMQ's model) and common/regex.h.
#include "broker/access.h"

#include <gtest/gtest.h>

#include <string>

#include "common/regex.h"

namespace wharf::broker {
namespace {

std::shared_ptr<const Access> Make(const std::vector<std::string>& tags,
                                   const std::vector<UserPermission>& permissions) {
  auto access = Access::Make("bob", tags, permissions);
  EXPECT_TRUE(access.ok()) << access.status().ToString();
  return access.ok() ? *access : Access::None("bob");
}

TEST(RegexTest, SearchesUnanchoredAsRabbitMqsReRun) {
  auto re = Regex::Compile("bob");
  ASSERT_TRUE(re.ok());
  EXPECT_TRUE(re->Search("bob"));
  EXPECT_TRUE(re->Search("xbobx"));
  EXPECT_FALSE(re->Search("bo"));
  auto anchored = Regex::Compile("^bob-.*$");
  ASSERT_TRUE(anchored.ok());
  EXPECT_TRUE(anchored->Search("bob-1"));
  EXPECT_FALSE(anchored->Search("xbob-1"));
  // Not UTF-8: no match, never a crash.
  EXPECT_FALSE(Regex::Compile(".*")->Search(std::string("\xff\xfe", 2)));
}

TEST(RegexTest, ABadPatternIsRefusedNamingIt) {
  auto re = Regex::Compile("(unclosed");
  ASSERT_FALSE(re.ok());
  EXPECT_EQ(re.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(re.status().message().find("(unclosed"), std::string_view::npos)
      << re.status().message();
}

TEST(RegexTest, ARunawayPatternStopsAndDoesNotMatch) {
  // Catastrophic backtracking: bounded by the match limit, counted as no match.
  auto re = Regex::Compile("^(a+)+$");
  ASSERT_TRUE(re.ok());
  EXPECT_FALSE(re->Search(std::string(200, 'a') + "!"));
}

TEST(AccessTest, ChecksEachPermissionAgainstItsPattern) {
  auto access = Make({}, {UserPermission{"/", "^bob-", "^out$", "^in-.*"}});
  EXPECT_TRUE(access->Allows("/", Permission::kConfigure, ResourceKind::kQueue, "bob-q"));
  EXPECT_FALSE(access->Allows("/", Permission::kConfigure, ResourceKind::kQueue, "alice-q"));
  EXPECT_TRUE(access->Allows("/", Permission::kWrite, ResourceKind::kExchange, "out"));
  EXPECT_FALSE(access->Allows("/", Permission::kWrite, ResourceKind::kExchange, "outx"));
  EXPECT_TRUE(access->Allows("/", Permission::kRead, ResourceKind::kQueue, "in-1"));
  EXPECT_FALSE(access->Allows("/", Permission::kRead, ResourceKind::kQueue, "bob-q"));
  // Another vhost: nothing.
  EXPECT_FALSE(access->Allows("other", Permission::kRead, ResourceKind::kQueue, "in-1"));
  EXPECT_TRUE(access->CanUseVhost("/"));
  EXPECT_FALSE(access->CanUseVhost("other"));
}

TEST(AccessTest, TheEmptyPatternAllowsNoName) {
  auto access = Make({}, {UserPermission{"/", "", "", ".*"}});
  EXPECT_FALSE(access->Allows("/", Permission::kConfigure, ResourceKind::kQueue, "q"));
  EXPECT_FALSE(access->Allows("/", Permission::kWrite, ResourceKind::kExchange, "amq.default"));
  EXPECT_TRUE(access->Allows("/", Permission::kRead, ResourceKind::kQueue, "q"));
  // Still a user of the vhost (it has an entry), as in RabbitMQ.
  EXPECT_TRUE(access->CanUseVhost("/"));
}

TEST(AccessTest, RefusalsUseRabbitMqsWords) {
  auto access = Make({}, {UserPermission{"/", "", "", ""}});
  Status s = access->Check("/", Permission::kConfigure, ResourceKind::kQueue, "q1");
  EXPECT_EQ(s.code(), StatusCode::kAccessRefused);
  EXPECT_EQ(s.message(), "access to queue 'q1' in vhost '/' refused for user 'bob'");
  s = access->Check("/", Permission::kWrite, ResourceKind::kExchange, "amq.default");
  EXPECT_EQ(s.message(), "access to exchange 'amq.default' in vhost '/' refused for user 'bob'");
  s = access->Check("/", Permission::kRead, ResourceKind::kQueue, "q2");
  EXPECT_EQ(s.message(), "access to queue 'q2' in vhost '/' refused for user 'bob'");
}

TEST(AccessTest, TagsGrantOperatorActions) {
  auto monitoring = Make({"monitoring", "custom"}, {});
  EXPECT_TRUE(monitoring->HasTag(kMonitoringTags));
  EXPECT_TRUE(monitoring->HasTag(kAnyManagementTag));
  EXPECT_FALSE(monitoring->HasTag(kTagAdministrator));
  Status s = monitoring->CheckTag(kTagAdministrator, "manage users");
  EXPECT_EQ(s.code(), StatusCode::kAccessRefused);
  EXPECT_EQ(s.message(), "user 'bob' may not manage users: it needs the tag administrator");
  auto none = Access::None("gone");
  EXPECT_FALSE(none->HasTag(kAnyManagementTag));
  EXPECT_FALSE(none->CanUseVhost("/"));
  EXPECT_EQ(none->CheckTag(kMonitoringTags, "read metrics").message(),
            "user 'gone' may not read metrics: it needs the tag monitoring or administrator");
  EXPECT_EQ(TagNames(kAnyManagementTag), "management, policymaker, monitoring or administrator");
}

TEST(AccessTest, ABadPatternIsRefused) {
  auto access = Access::Make("bob", {}, {UserPermission{"/", "[", ".*", ".*"}});
  EXPECT_EQ(access.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace wharf::broker
