// The program's wiring without running it: which rendezvous backend the
// flags get (app/rendezvous_backends.hpp), and which first arguments are
// subcommands (app/subcommands.hpp).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddprun/launcher/app/rendezvous_backends.hpp"
#include "ddprun/launcher/app/subcommands.hpp"
#include "ddprun/launcher/rendezvous/standalone_rendezvous.hpp"
#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

TEST(RendezvousBackendsTest, StandaloneFlagGetsTheStandaloneBackend) {
  LaunchConfig config;
  config.standalone = true;
  config.rdzv_backend = "c10d";
  const auto rendezvous = makeRendezvous(config, {2, "node0"});
  ASSERT_NE(rendezvous, nullptr);
  EXPECT_NE(dynamic_cast<StandaloneRendezvous*>(rendezvous.get()), nullptr);
}

TEST(RendezvousBackendsTest, C10dOnOneNodeNeedsNobodyElse) {
  LaunchConfig config;
  config.rdzv_backend = "c10d";
  config.max_nodes = 1;
  const auto rendezvous = makeRendezvous(config, {1, "node0"});
  EXPECT_NE(dynamic_cast<StandaloneRendezvous*>(rendezvous.get()), nullptr);
}

TEST(RendezvousBackendsTest, UnknownBackendAcrossNodesIsAConfigError) {
  LaunchConfig config;
  config.rdzv_backend = "zookeeper";
  config.min_nodes = 2;
  config.max_nodes = 2;
  try {
    (void)makeRendezvous(config, {1, "node0"});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("--rdzv-backend zookeeper"), std::string::npos)
        << error.what();
  }
}

TEST(SubcommandsTest, ATrainingProgramIsNoSubcommand) {
  EXPECT_EQ(runSubcommand({"train.py", "--epochs", "1"}), std::nullopt);
  EXPECT_EQ(runSubcommand({}), std::nullopt);
}

TEST(SubcommandsTest, StatusWithABadFlagExitsWithUsageError) {
  const std::optional<int> status = runSubcommand({"status", "--no-such-flag"});
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(*status, 0);
}

}  // namespace
}  // namespace ddprun::launcher
