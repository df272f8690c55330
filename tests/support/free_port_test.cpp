// test_support::freeLoopbackPort: a test that asks for several ports (an etcd
// cluster: a client and a peer port per member) gets different ones, though
// each is released before the next is asked for and the kernel may hand a
// released port out again.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "ddprun/test_support/files.hpp"

namespace ddprun::test_support {
namespace {

TEST(FreeLoopbackPort, NeverHandsTheSamePortOutTwice) {
  std::set<std::uint16_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const std::uint16_t port = freeLoopbackPort();
    EXPECT_NE(port, 0);
    EXPECT_TRUE(seen.insert(port).second) << "port " << port << " again, at call " << i;
  }
}

}  // namespace
}  // namespace ddprun::test_support
