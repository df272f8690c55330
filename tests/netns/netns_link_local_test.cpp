// Two hosts that reach each other only by IPv6 link-local addresses
// (NetLab::useLinkLocalOnly: no IPv4, no name resolving to them), the
// endpoint written with its scope as users write it,
// "[fe80::11%eth0]:29603": a static and a c10d job of `train` (Gloo on eth0)
// train a world of 4 to the end. The workers' store is node 0's, at an
// address with the same scope.
#include <string>
#include <vector>

#include "netns_train_fixture.hpp"

namespace ddprun::netns_test {
namespace {

class NetnsLinkLocalTest : public NetnsTrainTest,
                           public ::testing::WithParamInterface<std::string> {};

TEST_P(NetnsLinkLocalTest, TwoHostsTrainOverLinkLocalAddresses) {
  buildLab(2, /*with_daemon=*/false);
  lab_->useLinkLocalOnly();
  const std::string endpoint = "[" + lab_->linkLocalAddress("h1") + "]:29603";
  const auto line = [&](int node_rank) {
    std::vector<std::string> args = {"--nnodes=2",
                                     "--node-rank=" + std::to_string(node_rank),
                                     "--nproc-per-node=2",
                                     "--rdzv-backend=" + GetParam(),
                                     "--rdzv-endpoint=" + endpoint,
                                     "--no-python"};
    const std::vector<std::string> program = train(2);
    args.insert(args.end(), program.begin(), program.end());
    return args;
  };
  Subprocess b = ddprunOn("b", "h2", line(1));
  Subprocess a = ddprunOn("a", "h1", line(0));
  const auto a_status = a.waitFor(180s);
  const auto b_status = b.waitFor(60s);
  ASSERT_TRUE(a_status && a_status->success()) << describe(a_status) << logs({"a", "b"});
  ASSERT_TRUE(b_status && b_status->success()) << describe(b_status) << logs({"a", "b"});
  EXPECT_EQ(snapshotEpochs(), 2);
  EXPECT_TRUE(contains(log("a"), "world 4 (gloo), batch 32 x 4")) << log("a");
  EXPECT_TRUE(contains(log("a"), "workers' store at [fe80::11%eth0]:")) << log("a");
}

INSTANTIATE_TEST_SUITE_P(Backends, NetnsLinkLocalTest, ::testing::Values("static", "c10d"),
                         [](const ::testing::TestParamInfo<std::string>& backend) {
                           return backend.param == "static" ? std::string("Static")
                                                            : std::string("C10d");
                         });

}  // namespace
}  // namespace ddprun::netns_test
