#include "ddprun/proto/env_contract.hpp"

#include <charconv>
#include <cstdlib>
#include <limits>

#include "ddprun/proto/errors.hpp"

namespace ddprun::proto {
namespace {

// Reads variables through a lookup and turns every problem into one
// ConfigError line that names the variable.
class EnvReader {
 public:
  explicit EnvReader(const EnvLookup& lookup) : lookup_(lookup) {}

  std::string requiredText(std::string_view name) const {
    auto value = lookup_(name);
    if (!value || value->empty()) {
      fail(name, "is not set (is this process running under ddprun or torchrun?)");
    }
    return *value;
  }

  int requiredInt(std::string_view name, int min, int max) const {
    return parseInt(name, requiredText(name), min, max);
  }

  void optionalInt(std::string_view name, int& out, int min, int max) const {
    if (auto value = lookup_(name); value && !value->empty()) {
      out = parseInt(name, *value, min, max);
    }
  }

  void optionalText(std::string_view name, std::string& out) const {
    if (auto value = lookup_(name)) {
      out = *value;
    }
  }

  // torch accepts exactly the string "True" as true; anything else but
  // "False" is a typo worth reporting rather than silently false.
  void optionalBool(std::string_view name, bool& out) const {
    auto value = lookup_(name);
    if (!value || value->empty()) {
      return;
    }
    if (*value != "True" && *value != "False") {
      fail(name, "is '" + *value + "', expected True or False");
    }
    out = *value == "True";
  }

  [[noreturn]] static void fail(std::string_view name, const std::string& why) {
    throw ConfigError("worker environment: " + std::string(name) + " " + why);
  }

 private:
  static int parseInt(std::string_view name, const std::string& text, int min, int max) {
    int value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) {
      fail(name, "is '" + text + "', not an integer");
    }
    if (value < min || value > max) {
      fail(name, "is " + text + ", outside " + std::to_string(min) + ".." + std::to_string(max));
    }
    return value;
  }

  const EnvLookup& lookup_;
};

constexpr int kMaxInt = std::numeric_limits<int>::max();

void checkConsistency(const WorkerEnv& worker) {
  if (worker.rank >= worker.world_size) {
    EnvReader::fail(env::kRank, "is " + std::to_string(worker.rank) + " but WORLD_SIZE is " +
                                    std::to_string(worker.world_size));
  }
  if (worker.local_rank >= worker.local_world_size) {
    EnvReader::fail(env::kLocalRank, "is " + std::to_string(worker.local_rank) +
                                         " but LOCAL_WORLD_SIZE is " +
                                         std::to_string(worker.local_world_size));
  }
  if (worker.local_world_size > worker.world_size) {
    EnvReader::fail(env::kLocalWorldSize, "is " + std::to_string(worker.local_world_size) +
                                              ", more than WORLD_SIZE " +
                                              std::to_string(worker.world_size));
  }
  if (worker.group_rank >= worker.group_world_size) {
    EnvReader::fail(env::kGroupRank, "is " + std::to_string(worker.group_rank) +
                                         " but GROUP_WORLD_SIZE is " +
                                         std::to_string(worker.group_world_size));
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> toEnvironment(const WorkerEnv& worker) {
  auto entry = [](std::string_view name, std::string value) {
    return std::pair<std::string, std::string>(std::string(name), std::move(value));
  };
  return {
      entry(env::kRank, std::to_string(worker.rank)),
      entry(env::kLocalRank, std::to_string(worker.local_rank)),
      entry(env::kGroupRank, std::to_string(worker.group_rank)),
      entry(env::kRoleRank, std::to_string(worker.role_rank)),
      entry(env::kRoleName, worker.role_name),
      entry(env::kLocalWorldSize, std::to_string(worker.local_world_size)),
      entry(env::kWorldSize, std::to_string(worker.world_size)),
      entry(env::kGroupWorldSize, std::to_string(worker.group_world_size)),
      entry(env::kRoleWorldSize, std::to_string(worker.role_world_size)),
      entry(env::kMasterAddr, worker.master_addr),
      entry(env::kMasterPort, std::to_string(worker.master_port)),
      entry(env::kRestartCount, std::to_string(worker.restart_count)),
      entry(env::kMaxRestarts, std::to_string(worker.max_restarts)),
      entry(env::kRunId, worker.run_id),
      entry(env::kUseAgentStore, worker.use_agent_store ? "True" : "False"),
      entry(env::kErrorFile, worker.error_file),
  };
}

WorkerEnv fromEnvironment(const EnvLookup& lookup) {
  const EnvReader reader(lookup);
  WorkerEnv worker;
  worker.world_size = reader.requiredInt(env::kWorldSize, 1, kMaxInt);
  worker.rank = reader.requiredInt(env::kRank, 0, kMaxInt);
  worker.local_rank = reader.requiredInt(env::kLocalRank, 0, kMaxInt);
  worker.master_addr = reader.requiredText(env::kMasterAddr);
  worker.master_port = static_cast<std::uint16_t>(reader.requiredInt(env::kMasterPort, 1, 65535));
  worker.local_world_size = worker.world_size;
  worker.role_world_size = worker.world_size;
  worker.role_rank = worker.rank;
  worker.group_world_size = 1;
  reader.optionalInt(env::kLocalWorldSize, worker.local_world_size, 1, kMaxInt);
  reader.optionalInt(env::kRoleWorldSize, worker.role_world_size, 1, kMaxInt);
  reader.optionalInt(env::kGroupRank, worker.group_rank, 0, kMaxInt);
  reader.optionalInt(env::kGroupWorldSize, worker.group_world_size, 1, kMaxInt);
  reader.optionalInt(env::kRoleRank, worker.role_rank, 0, kMaxInt);
  reader.optionalInt(env::kRestartCount, worker.restart_count, 0, kMaxInt);
  reader.optionalInt(env::kMaxRestarts, worker.max_restarts, 0, kMaxInt);
  reader.optionalText(env::kRoleName, worker.role_name);
  reader.optionalText(env::kRunId, worker.run_id);
  reader.optionalText(env::kErrorFile, worker.error_file);
  reader.optionalBool(env::kUseAgentStore, worker.use_agent_store);
  checkConsistency(worker);
  return worker;
}

WorkerEnv fromProcessEnvironment() {
  return fromEnvironment([](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  });
}

}  // namespace ddprun::proto
