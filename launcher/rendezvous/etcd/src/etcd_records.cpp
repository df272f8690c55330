#include "ddprun/launcher/etcd/etcd_records.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ddprun/proto/json_parse.hpp"

namespace ddprun::launcher::etcd_rdzv {
namespace {

using nlohmann::json;

// Parses `text` as a JSON object and hands it to `read`; anything that does
// not parse, is not an object, or lacks a field `read` needs is nullopt.
template <typename Record, typename Read>
std::optional<Record> decodeWith(const std::string& text, Read read) {
  try {
    const json object = proto::parseJson(text);
    if (!object.is_object()) {
      return std::nullopt;
    }
    return read(object);
  } catch (const std::exception&) {  // nlohmann's errors, and out-of-range fields
    return std::nullopt;
  }
}

// nlohmann converts numbers silently (70000 to a uint16_t wraps): ranges are
// checked here.
int intIn(const json& object, const char* field, int low, int high) {
  const auto value = object.at(field).get<std::int64_t>();
  if (!object.at(field).is_number_integer() || value < low || value > high) {
    throw std::out_of_range(field);
  }
  return static_cast<int>(value);
}

std::uint16_t portOf(const json& object) {
  return static_cast<std::uint16_t>(intIn(object, "store_port", 0, 65535));
}

}  // namespace

Keys::Keys(const std::string& prefix, const std::string& run_id)
    : base((prefix.ends_with('/') ? prefix : prefix + "/") + run_id + "/") {}

const NodeRecord* StateRecord::find(const std::string& id) const {
  for (const NodeRecord& node : nodes) {
    if (node.id == id) {
      return &node;
    }
  }
  return nullptr;
}

const QuarantineRecord* StateRecord::quarantineOf(const std::string& host) const {
  for (const QuarantineRecord& record : quarantined) {
    if (record.host == host) {
      return &record;
    }
  }
  return nullptr;
}

std::string encode(const MemberRecord& record) {
  json object = {{"id", record.id},
                 {"local_world_size", record.local_world_size},
                 {"last_round", record.last_round},
                 {"store_host", record.store_host},
                 {"store_port", record.store_port}};
  if (record.rank_hint) {
    object["rank_hint"] = *record.rank_hint;
  }
  if (record.lease_ttl_s > 0) {
    object["lease_ttl_s"] = record.lease_ttl_s;
  }
  return object.dump();
}

std::string encode(const StateRecord& record) {
  json nodes = json::array();
  for (const NodeRecord& node : record.nodes) {
    nodes.push_back({{"id", node.id},
                     {"group_rank", node.group_rank},
                     {"base_rank", node.base_rank},
                     {"local_world_size", node.local_world_size},
                     {"store_host", node.store_host},
                     {"store_port", node.store_port}});
  }
  json state = {{"round", record.round},
                {"suspended", record.suspended},
                {"first", record.first},
                {"world_size", record.world_size},
                {"nodes", nodes}};
  if (!record.quarantined.empty()) {
    json quarantined = json::array();
    for (const QuarantineRecord& host : record.quarantined) {
      quarantined.push_back(
          {{"host", host.host}, {"failures", host.failures}, {"left_ms", host.left_ms}});
    }
    state["quarantined"] = std::move(quarantined);
  }
  return state.dump();
}

std::string encode(const ClosedRecord& record) {
  return json{{"failed", record.failed}, {"by", record.by}}.dump();
}

std::string encodeRound(std::int64_t round) { return json{{"round", round}}.dump(); }

std::optional<MemberRecord> decodeMember(const std::string& text) {
  return decodeWith<MemberRecord>(text, [](const json& object) {
    MemberRecord record;
    record.id = object.at("id").get<std::string>();
    record.local_world_size = intIn(object, "local_world_size", 1, 1 << 20);
    record.last_round = object.at("last_round").get<std::int64_t>();
    record.store_host = object.at("store_host").get<std::string>();
    record.store_port = portOf(object);
    if (object.contains("rank_hint")) {
      record.rank_hint = object.at("rank_hint").get<int>();
    }
    record.lease_ttl_s = object.value("lease_ttl_s", std::int64_t{0});
    return record;
  });
}

std::optional<StateRecord> decodeState(const std::string& text) {
  return decodeWith<StateRecord>(text, [](const json& object) {
    StateRecord record;
    record.round = object.at("round").get<std::int64_t>();
    record.suspended = object.at("suspended").get<bool>();
    record.first = object.value("first", false);
    record.world_size = object.at("world_size").get<int>();
    for (const json& node : object.at("nodes")) {
      record.nodes.push_back(
          {node.at("id").get<std::string>(), intIn(node, "group_rank", 0, 1 << 20),
           intIn(node, "base_rank", 0, 1 << 30), intIn(node, "local_world_size", 1, 1 << 20),
           node.at("store_host").get<std::string>(), portOf(node)});
    }
    for (const json& host : object.value("quarantined", json::array())) {
      record.quarantined.push_back({host.at("host").get<std::string>(),
                                    intIn(host, "failures", 0, 1 << 30),
                                    host.at("left_ms").get<std::int64_t>()});
    }
    return record;
  });
}

std::optional<ClosedRecord> decodeClosed(const std::string& text) {
  return decodeWith<ClosedRecord>(text, [](const json& object) {
    return ClosedRecord{object.at("failed").get<bool>(), object.at("by").get<std::string>()};
  });
}

std::optional<std::int64_t> decodeRound(const std::string& text) {
  return decodeWith<std::int64_t>(
      text, [](const json& object) { return object.at("round").get<std::int64_t>(); });
}

}  // namespace ddprun::launcher::etcd_rdzv
