// The system's side of the socket interface (socket_interface.hpp), asked on
// this machine: loopback is always there, so what it answers about loopback
// can be checked anywhere. The netns train test covers a real network.
#include <gtest/gtest.h>

#include <algorithm>

#include "ddprun/launcher/host/socket_interface.hpp"

namespace ddprun::launcher {
namespace {

TEST(NetworkProbe, LoopbackIsResolvedRoutedAndFoundOnItsInterface) {
  const NetworkProbe probe = systemNetwork();
  EXPECT_FALSE(probe.host_name.empty());
  const IpAddress loopback = boost::asio::ip::make_address("127.0.0.1");
  const std::vector<IpAddress> localhost = probe.resolve("localhost");
  EXPECT_NE(std::find(localhost.begin(), localhost.end(), loopback), localhost.end());
  EXPECT_EQ(probe.resolve("127.0.0.1"), std::vector<IpAddress>{loopback});

  std::string why;
  const std::optional<IpAddress> source = probe.source_address(loopback, 9, why);
  ASSERT_TRUE(source.has_value()) << why;
  EXPECT_TRUE(source->is_loopback()) << source->to_string();
  const std::optional<std::string> interface = interfaceHolding(probe.interfaces(), *source);
  ASSERT_TRUE(interface.has_value()) << source->to_string();
  EXPECT_EQ(*interface, "lo");
}

}  // namespace
}  // namespace ddprun::launcher
