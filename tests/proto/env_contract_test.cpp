// The worker environment contract: what the launcher writes is what the
// worker reads, and a broken environment is one line naming the variable.
#include "ddprun/proto/env_contract.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "ddprun/proto/errors.hpp"

namespace ddprun::proto {
namespace {

using ::testing::HasSubstr;

using Vars = std::map<std::string, std::string, std::less<>>;

EnvLookup lookupIn(const Vars& vars) {
  return [&vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

Vars minimal() {
  return {{"RANK", "1"},
          {"LOCAL_RANK", "1"},
          {"WORLD_SIZE", "4"},
          {"MASTER_ADDR", "10.0.0.1"},
          {"MASTER_PORT", "29500"}};
}

std::string errorFor(const Vars& vars) {
  try {
    fromEnvironment(lookupIn(vars));
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "";
}

TEST(EnvContractTest, EveryFieldRoundTripsThroughTheEnvironment) {
  WorkerEnv written;
  written.rank = 5;
  written.local_rank = 1;
  written.group_rank = 2;
  written.role_rank = 5;
  written.role_name = "trainer";
  written.local_world_size = 2;
  written.world_size = 8;
  written.group_world_size = 4;
  written.role_world_size = 8;
  written.master_addr = "node0.example";
  written.master_port = 29601;
  written.restart_count = 3;
  written.max_restarts = 5;
  written.run_id = "job7";
  written.use_agent_store = true;
  written.error_file = "logs/attempt_3/1/error.json";
  Vars vars;
  for (const auto& [name, value] : toEnvironment(written)) {
    EXPECT_TRUE(vars.emplace(name, value).second) << name << " written twice";
  }
  EXPECT_EQ(vars.size(), 16u);
  EXPECT_EQ(vars.at("TORCHELASTIC_USE_AGENT_STORE"), "True");
  EXPECT_EQ(fromEnvironment(lookupIn(vars)), written);
}

TEST(EnvContractTest, OptionalVariablesTakeTorchrunsDefaults) {
  const WorkerEnv worker = fromEnvironment(lookupIn(minimal()));
  EXPECT_EQ(worker.rank, 1);
  EXPECT_EQ(worker.local_world_size, 4);
  EXPECT_EQ(worker.role_world_size, 4);
  EXPECT_EQ(worker.role_rank, 1);
  EXPECT_EQ(worker.restart_count, 0);
  EXPECT_FALSE(worker.use_agent_store);
}

TEST(EnvContractTest, EachMissingRequiredVariableIsNamed) {
  for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    Vars vars = minimal();
    vars.erase(name);
    EXPECT_THAT(errorFor(vars), HasSubstr(std::string(name) + " is not set")) << name;
  }
}

TEST(EnvContractTest, MalformedValuesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"RANK", "one"},
      {"WORLD_SIZE", "0"},
      {"MASTER_PORT", "70000"},
      {"LOCAL_RANK", "-1"},
      {"MASTER_PORT", "29500x"},
      {"TORCHELASTIC_RESTART_COUNT", "x"},
      {"TORCHELASTIC_USE_AGENT_STORE", "true"},
  };
  for (const auto& [name, value] : cases) {
    Vars vars = minimal();
    vars[name] = value;
    const std::string error = errorFor(vars);
    EXPECT_THAT(error, HasSubstr(name + " is")) << name << "=" << value;
    EXPECT_THAT(error, HasSubstr(value)) << error;
  }
}

TEST(EnvContractTest, InconsistentRanksAreRejected) {
  Vars vars = minimal();
  vars["RANK"] = "4";
  EXPECT_THAT(errorFor(vars), HasSubstr("RANK is 4 but WORLD_SIZE is 4"));
  vars = minimal();
  vars["LOCAL_WORLD_SIZE"] = "1";
  EXPECT_THAT(errorFor(vars), HasSubstr("LOCAL_RANK is 1 but LOCAL_WORLD_SIZE is 1"));
  vars = minimal();
  vars["LOCAL_WORLD_SIZE"] = "8";
  EXPECT_THAT(errorFor(vars), HasSubstr("LOCAL_WORLD_SIZE is 8, more than WORLD_SIZE 4"));
  vars = minimal();
  vars["GROUP_RANK"] = "2";
  vars["GROUP_WORLD_SIZE"] = "2";
  EXPECT_THAT(errorFor(vars), HasSubstr("GROUP_RANK is 2 but GROUP_WORLD_SIZE is 2"));
}

}  // namespace
}  // namespace ddprun::proto
