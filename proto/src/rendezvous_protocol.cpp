#include "ddprun/proto/rendezvous_protocol.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <utility>

#include "ddprun/proto/errors.hpp"

namespace ddprun::proto::rendezvous {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxRunIdBytes = 256;

constexpr std::array<std::pair<Verb, std::string_view>, 7> kVerbs = {{
    {Verb::kJoin, "join"},
    {Verb::kHeartbeat, "heartbeat"},
    {Verb::kRestart, "restart"},
    {Verb::kLeave, "leave"},
    {Verb::kClose, "close"},
    {Verb::kAbort, "abort"},
    {Verb::kDone, "done"},
}};

constexpr std::array<std::pair<EventType, std::string_view>, 8> kEventTypes = {{
    {EventType::kRound, "round"},
    {EventType::kSuspended, "suspended"},
    {EventType::kSpare, "spare"},
    {EventType::kClosed, "closed"},
    {EventType::kFinished, "finished"},
    {EventType::kDropped, "dropped"},
    {EventType::kLeft, "left"},
    {EventType::kError, "error"},
}};

// The JSON field names, once.
namespace field {
constexpr const char* kAgent = "agent";
constexpr const char* kLocalWorldSize = "local_world_size";
constexpr const char* kNodeRank = "node_rank";
constexpr const char* kMinNodes = "min_nodes";
constexpr const char* kMaxNodes = "max_nodes";
constexpr const char* kLastCallMs = "last_call_timeout_ms";
constexpr const char* kKeepAliveMs = "keep_alive_timeout_ms";
constexpr const char* kStoreHost = "store_host";
constexpr const char* kStorePort = "store_port";
constexpr const char* kType = "type";
constexpr const char* kRound = "round";
constexpr const char* kGroupRank = "group_rank";
constexpr const char* kGroupWorldSize = "group_world_size";
constexpr const char* kBaseRank = "base_rank";
constexpr const char* kWorldSize = "world_size";
constexpr const char* kFailedOn = "failed_on";
constexpr const char* kMessage = "message";
}  // namespace field

bool hasRound(EventType type) {
  return type == EventType::kRound || type == EventType::kSuspended || type == EventType::kFinished;
}

}  // namespace

std::string_view scopePrefix(Scope scope) {
  return scope == Scope::kElastic ? "ddprun/rdzv/" : "ddprun/static/";
}

std::string key(Scope scope, std::string_view run_id, std::string_view rest) {
  std::string text(scopePrefix(scope));
  text.append(run_id).append("/").append(rest);
  return text;
}

bool isElasticKey(std::string_view text) { return text.starts_with(scopePrefix(Scope::kElastic)); }

std::string_view verbName(Verb verb) {
  for (const auto& [value, name] : kVerbs) {
    if (value == verb) {
      return name;
    }
  }
  return "unknown";
}

std::string verbKey(std::string_view run_id, Verb verb) {
  return key(Scope::kElastic, run_id, verbName(verb));
}

std::string eventKey(std::string_view run_id, std::string_view agent, std::int64_t n) {
  return key(Scope::kElastic, run_id, "events/" + std::string(agent) + "/" + std::to_string(n));
}

std::optional<ElasticRequestKey> parseElasticKey(std::string_view text) {
  if (!isElasticKey(text)) {
    return std::nullopt;
  }
  text.remove_prefix(scopePrefix(Scope::kElastic).size());
  const std::size_t slash = text.find('/');
  if (slash == 0 || slash == std::string_view::npos || slash > kMaxRunIdBytes) {
    return std::nullopt;
  }
  ElasticRequestKey parsed{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1)),
                           std::nullopt};
  for (const auto& [value, name] : kVerbs) {
    if (name == parsed.verb_text) {
      parsed.verb = value;
    }
  }
  return parsed;
}

std::string encodeJoin(const JoinRequest& join) {
  json request = {
      {field::kAgent, join.agent},
      {field::kLocalWorldSize, join.local_world_size},
      {field::kMinNodes, join.min_nodes},
      {field::kMaxNodes, join.max_nodes},
      {field::kLastCallMs, join.last_call_timeout.count()},
      {field::kKeepAliveMs, join.keep_alive_timeout.count()},
      {field::kStoreHost, join.store_host},
      {field::kStorePort, join.store_port},
  };
  if (join.node_rank) {
    request[field::kNodeRank] = *join.node_rank;
  }
  return request.dump();
}

std::optional<JoinRequest> decodeJoin(std::string_view text, std::string& why) {
  const json request = json::parse(text, nullptr, /*allow_exceptions=*/false);
  JoinRequest join;
  try {
    join.agent = request.at(field::kAgent).get<std::string>();
    join.local_world_size = request.at(field::kLocalWorldSize).get<int>();
    if (request.contains(field::kNodeRank)) {
      join.node_rank = request.at(field::kNodeRank).get<int>();
    }
    join.min_nodes = request.at(field::kMinNodes).get<int>();
    join.max_nodes = request.at(field::kMaxNodes).get<int>();
    join.last_call_timeout =
        std::chrono::milliseconds(request.at(field::kLastCallMs).get<std::int64_t>());
    join.keep_alive_timeout =
        std::chrono::milliseconds(request.at(field::kKeepAliveMs).get<std::int64_t>());
    join.store_host = request.at(field::kStoreHost).get<std::string>();
    join.store_port = request.at(field::kStorePort).get<std::uint16_t>();
  } catch (const json::exception& error) {
    why = std::string("a bad rendezvous join: ") + error.what();
    return std::nullopt;
  }
  if (join.agent.empty() || join.agent.find('/') != std::string::npos || join.min_nodes < 1 ||
      join.max_nodes < join.min_nodes || join.local_world_size < 1) {
    why = "a bad rendezvous join (empty agent id or one with '/', or bad node counts)";
    return std::nullopt;
  }
  // A keep-alive of 0 would drop the agent the moment it joined; one past
  // the bound would wrap on the daemon's clock and do the same.
  if (join.keep_alive_timeout.count() <= 0 || join.keep_alive_timeout > kMaxJoinTimeout ||
      join.last_call_timeout.count() < 0 || join.last_call_timeout > kMaxJoinTimeout) {
    why = "a bad rendezvous join: keep_alive_timeout_ms " +
          std::to_string(join.keep_alive_timeout.count()) + " (1.." +
          std::to_string(kMaxJoinTimeout.count()) + "), last_call_timeout_ms " +
          std::to_string(join.last_call_timeout.count()) + " (0.." +
          std::to_string(kMaxJoinTimeout.count()) + ")";
    return std::nullopt;
  }
  return join;
}

std::string_view eventTypeName(EventType type) {
  for (const auto& [value, name] : kEventTypes) {
    if (value == type) {
      return name;
    }
  }
  return "unknown";
}

std::string encodeEvent(const Event& event) {
  json out = {{field::kType, eventTypeName(event.type)}};
  if (hasRound(event.type)) {
    out[field::kRound] = event.round;
  }
  if (event.type == EventType::kRound) {
    out[field::kGroupRank] = event.group_rank;
    out[field::kGroupWorldSize] = event.group_world_size;
    out[field::kBaseRank] = event.base_rank;
    out[field::kLocalWorldSize] = event.local_world_size;
    out[field::kWorldSize] = event.world_size;
    out[field::kStoreHost] = event.store_host;
    out[field::kStorePort] = event.store_port;
  }
  if (event.failed_on) {
    out[field::kFailedOn] = *event.failed_on;
  }
  if (event.type == EventType::kError) {
    out[field::kMessage] = event.message;
  }
  return out.dump();
}

Event decodeEvent(std::string_view text) {
  const json in = json::parse(text, nullptr, /*allow_exceptions=*/false);
  Event event;
  try {
    const std::string type = in.at(field::kType).get<std::string>();
    bool known = false;
    for (const auto& [value, name] : kEventTypes) {
      if (name == type) {
        event.type = value;
        known = true;
      }
    }
    if (!known) {
      throw StoreError("a rendezvous event of unknown type '" + type + "'");
    }
    if (hasRound(event.type)) {
      event.round = in.at(field::kRound).get<std::int64_t>();
    }
    if (event.type == EventType::kRound) {
      event.group_rank = in.at(field::kGroupRank).get<int>();
      event.group_world_size = in.at(field::kGroupWorldSize).get<int>();
      event.base_rank = in.at(field::kBaseRank).get<int>();
      event.local_world_size = in.at(field::kLocalWorldSize).get<int>();
      event.world_size = in.at(field::kWorldSize).get<int>();
      event.store_host = in.at(field::kStoreHost).get<std::string>();
      event.store_port = in.at(field::kStorePort).get<std::uint16_t>();
    }
    if (in.contains(field::kFailedOn)) {
      event.failed_on = in.at(field::kFailedOn).get<std::string>();
    }
    if (event.type == EventType::kError) {
      event.message = in.value(field::kMessage, std::string("the rendezvous refused this agent"));
    }
  } catch (const json::exception& error) {
    throw StoreError("a malformed rendezvous event '" + std::string(text) + "': " + error.what());
  }
  return event;
}

}  // namespace ddprun::proto::rendezvous
