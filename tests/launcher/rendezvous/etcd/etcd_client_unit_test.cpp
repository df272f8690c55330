// The etcd client's pure parts: the member list and etcd's base64.
#include <gtest/gtest.h>

#include <string>

#include "ddprun/launcher/etcd/etcd_client.hpp"

namespace ddprun::launcher::etcd {
namespace {

TEST(EtcdMembers, ParsesHostsPortsAndBracketedIpv6) {
  const auto members = parseMembers("--rdzv-endpoint", "node1:2380, 10.0.0.2,[::1]:4001,[fe80::1]");
  ASSERT_EQ(members.size(), 4u);
  EXPECT_EQ(members[0].host, "node1");
  EXPECT_EQ(members[0].port, 2380);
  EXPECT_EQ(members[1].host, "10.0.0.2");
  EXPECT_EQ(members[1].port, 2379);
  EXPECT_EQ(members[2].host, "::1");
  EXPECT_EQ(members[2].port, 4001);
  EXPECT_EQ(members[3].host, "fe80::1");
  EXPECT_EQ(members[3].port, 2379);
}

TEST(EtcdMembers, BadEntriesGiveOneLineNamingWhatAndTheEntry) {
  for (const std::string list :
       {"", "a,,b", "a:0", "a:65536", "a:x", "a:", ":2379", "::1:2379", "[::1", "[]:1", "[::1]x"}) {
    try {
      parseMembers("--rdzv-endpoint", list);
      ADD_FAILURE() << "accepted '" << list << "'";
    } catch (const ConfigError& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("--rdzv-endpoint: ", 0), 0u) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
}

TEST(EtcdBase64, RoundTripsEveryByteAndEveryPaddingLength) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  for (std::size_t length = 0; length <= all.size(); ++length) {
    const std::string bytes = all.substr(0, length);
    EXPECT_EQ(fromBase64(toBase64(bytes)), bytes) << length;
  }
  EXPECT_EQ(toBase64("/a"), "L2E=");
  EXPECT_EQ(fromBase64("aGVsbG8="), "hello");
  EXPECT_EQ(fromBase64("YQ=="), "a");
  EXPECT_EQ(fromBase64(""), "");
}

TEST(EtcdBase64, RejectsTextThatIsNotPaddedBase64) {
  for (const std::string text : {"YQ=", "Y===", "====", "a!bc", "YQ==YQ==", "aGVsbG8", " YQ=="}) {
    EXPECT_THROW(fromBase64(text), Error) << text;
  }
}

}  // namespace
}  // namespace ddprun::launcher::etcd
