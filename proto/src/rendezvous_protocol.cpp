#include "ddprun/proto/rendezvous_protocol.hpp"

#include <nettle/hmac.h>
#include <nettle/memops.h>

#include <array>
#include <charconv>
#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/json_parse.hpp"
#include "ddprun/proto/json_text.hpp"
#include "ddprun/proto/random_bytes.hpp"

namespace ddprun::proto::rendezvous {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxRunIdBytes = 256;

constexpr std::array<std::pair<Verb, std::string_view>, 10> kVerbs = {{
    {Verb::kJoin, "join"},
    {Verb::kHeartbeat, "heartbeat"},
    {Verb::kRestart, "restart"},
    {Verb::kLeave, "leave"},
    {Verb::kClose, "close"},
    {Verb::kAbort, "abort"},
    {Verb::kDone, "done"},
    {Verb::kChallenge, "challenge"},
    {Verb::kStoreReady, "store_ready"},
    {Verb::kAck, "ack"},
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
constexpr const char* kSession = "session";
constexpr const char* kLastRound = "last_round";
constexpr const char* kRejoin = "rejoin";
constexpr const char* kWorkersDone = "workers_done";
constexpr const char* kAuth = "auth";
constexpr const char* kRendezvousHost = "rendezvous_host";
constexpr const char* kMaxRestarts = "max_restarts";
constexpr const char* kRestartsUsed = "restarts_used";
constexpr const char* kReports = "reports";
constexpr const char* kAcks = "acks";
constexpr const char* kRead = "read";
constexpr const char* kFailure = "failure";
constexpr const char* kRank = "rank";
constexpr const char* kLocalRank = "local_rank";
constexpr const char* kPid = "pid";
constexpr const char* kExitCode = "exit_code";
constexpr const char* kSignal = "signal";
constexpr const char* kReason = "reason";
constexpr const char* kQuarantineAfter = "quarantine_after";
constexpr const char* kQuarantineMs = "quarantine_ms";
constexpr const char* kQuarantine = "quarantine";
constexpr const char* kHost = "host";
constexpr const char* kFailures = "failures";
constexpr const char* kLeftMs = "left_ms";
}  // namespace field

std::string toHex(const unsigned char* bytes, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (std::size_t i = 0; i < size; ++i) {
    hex += kDigits[bytes[i] >> 4];
    hex += kDigits[bytes[i] & 0xf];
  }
  return hex;
}

// An int field, refused (not wrapped) when its number does not fit.
int intField(const json& object, const char* key) {
  const auto value = object.at(key).get<std::int64_t>();
  if (value < INT_MIN || value > INT_MAX) {
    throw std::out_of_range(std::string("field '") + key + "' out of range");
  }
  return static_cast<int>(value);
}

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

namespace {
constexpr std::string_view kQueryPrefix = "ddprun/query/";
}  // namespace

std::string queryKey(std::string_view question) {
  return std::string(kQueryPrefix).append(question);
}

bool isQueryKey(std::string_view key) { return key.starts_with(kQueryPrefix); }

std::string_view queryOf(std::string_view key) {
  return isQueryKey(key) ? key.substr(kQueryPrefix.size()) : std::string_view();
}

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

std::string eventKey(std::string_view run_id, std::string_view agent, std::int64_t session,
                     std::int64_t n) {
  return key(
      Scope::kElastic, run_id,
      "events/" + std::string(agent) + "/" + std::to_string(session) + "/" + std::to_string(n));
}

std::string challengeKey(std::string_view run_id, std::string_view agent, std::int64_t session) {
  return key(Scope::kElastic, run_id,
             "challenges/" + std::string(agent) + "/" + std::to_string(session));
}

std::string challengeRequest(std::string_view agent, std::int64_t session) {
  return std::string(agent) + "/" + std::to_string(session);
}

std::optional<std::pair<std::string, std::int64_t>> parseChallengeRequest(std::string_view value) {
  const std::size_t slash = value.rfind('/');
  if (slash == 0 || slash == std::string_view::npos || slash + 1 == value.size()) {
    return std::nullopt;
  }
  std::int64_t session = 0;
  const std::string_view digits = value.substr(slash + 1);
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), session);
  if (error != std::errc() || end != digits.data() + digits.size() || session < 0) {
    return std::nullopt;
  }
  return std::make_pair(std::string(value.substr(0, slash)), session);
}

std::string joinProof(std::string_view token, std::string_view run_id, std::string_view agent,
                      std::int64_t session, std::string_view nonce) {
  const std::string message = "ddprun-join|" + std::string(run_id) + "|" + std::string(agent) +
                              "|" + std::to_string(session) + "|" + std::string(nonce);
  hmac_sha256_ctx context;
  hmac_sha256_set_key(&context, token.size(), reinterpret_cast<const std::uint8_t*>(token.data()));
  hmac_sha256_update(&context, message.size(),
                     reinterpret_cast<const std::uint8_t*>(message.data()));
  std::uint8_t digest[SHA256_DIGEST_SIZE];
  hmac_sha256_digest(&context, sizeof(digest), digest);
  return toHex(digest, sizeof(digest));
}

std::string newNonce() {
  unsigned char bytes[16];
  fillRandom(bytes);
  return toHex(bytes, sizeof(bytes));
}

bool sameProof(std::string_view a, std::string_view b) {
  return a.size() == b.size() && memeql_sec(a.data(), b.data(), a.size()) != 0;
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
      {field::kSession, join.session},
      {field::kLastRound, join.last_round},
  };
  if (join.node_rank) {
    request[field::kNodeRank] = *join.node_rank;
  }
  if (!join.auth.empty()) {
    request[field::kAuth] = join.auth;
  }
  if (join.max_restarts) {
    request[field::kMaxRestarts] = *join.max_restarts;
  }
  request[field::kRestartsUsed] = join.restarts_used;
  if (join.quarantine_after) {
    request[field::kQuarantineAfter] = *join.quarantine_after;
  }
  if (join.quarantine_duration) {
    request[field::kQuarantineMs] = join.quarantine_duration->count();
  }
  if (join.rejoin) {
    request[field::kRejoin] = {{field::kRound, join.rejoin->round},
                               {field::kGroupRank, join.rejoin->group_rank},
                               {field::kGroupWorldSize, join.rejoin->group_world_size},
                               {field::kWorkersDone, join.rejoin->workers_done}};
  }
  return jsonText(request);
}

std::optional<JoinRequest> decodeJoin(std::string_view text, std::string& why) {
  std::string not_json;
  const json request = parseJson(text, &not_json);
  if (request.is_discarded()) {
    why = "a bad rendezvous join: " + not_json;
    return std::nullopt;
  }
  JoinRequest join;
  try {
    join.agent = request.at(field::kAgent).get<std::string>();
    join.local_world_size = intField(request, field::kLocalWorldSize);
    if (request.contains(field::kNodeRank)) {
      join.node_rank = intField(request, field::kNodeRank);
    }
    join.min_nodes = intField(request, field::kMinNodes);
    join.max_nodes = intField(request, field::kMaxNodes);
    join.last_call_timeout =
        std::chrono::milliseconds(request.at(field::kLastCallMs).get<std::int64_t>());
    join.keep_alive_timeout =
        std::chrono::milliseconds(request.at(field::kKeepAliveMs).get<std::int64_t>());
    join.store_host = request.at(field::kStoreHost).get<std::string>();
    const auto store_port = request.at(field::kStorePort).get<std::int64_t>();
    if (store_port < 1 || store_port > 65535 || join.store_host.empty()) {
      why = "a bad rendezvous join: the workers' store must be a host and a port in 1..65535";
      return std::nullopt;
    }
    join.store_port = static_cast<std::uint16_t>(store_port);
    join.session = request.at(field::kSession).get<std::int64_t>();
    join.last_round = request.at(field::kLastRound).get<std::int64_t>();
    join.auth = request.value(field::kAuth, std::string());
    if (request.contains(field::kMaxRestarts)) {
      join.max_restarts = intField(request, field::kMaxRestarts);
    }
    if (request.contains(field::kRestartsUsed)) {
      join.restarts_used = intField(request, field::kRestartsUsed);
    }
    if (request.contains(field::kQuarantineAfter)) {
      join.quarantine_after = intField(request, field::kQuarantineAfter);
    }
    if (request.contains(field::kQuarantineMs)) {
      join.quarantine_duration =
          std::chrono::milliseconds(request.at(field::kQuarantineMs).get<std::int64_t>());
    }
    if (request.contains(field::kRejoin)) {
      const json& rejoin = request.at(field::kRejoin);
      join.rejoin = Rejoin{
          rejoin.at(field::kRound).get<std::int64_t>(), intField(rejoin, field::kGroupRank),
          intField(rejoin, field::kGroupWorldSize), rejoin.at(field::kWorkersDone).get<bool>()};
    }
  } catch (const std::exception& error) {  // json's, and intField's out_of_range
    why = std::string("a bad rendezvous join: ") + error.what();
    return std::nullopt;
  }
  if (join.agent.empty() || join.agent.find('/') != std::string::npos ||
      join.agent.front() == '{' || join.min_nodes < 1 || join.restarts_used < 0 ||
      join.max_restarts.value_or(0) < 0 || join.quarantine_after.value_or(0) < 0 ||
      join.max_nodes < join.min_nodes || join.local_world_size < 1 || join.session < 0 ||
      join.last_round < -1 ||
      (join.rejoin && (join.rejoin->round < 0 || join.rejoin->group_rank < 0 ||
                       join.rejoin->group_rank >= join.rejoin->group_world_size))) {
    why =
        "a bad rendezvous join (empty agent id, one with '/' or starting with '{', bad node "
        "counts, restart counts, quarantine_after, session or rejoin)";
    return std::nullopt;
  }
  // A keep-alive of 0 would drop the agent the moment it joined; one past
  // the bound would wrap on the daemon's clock and do the same.
  const auto quarantine = join.quarantine_duration.value_or(std::chrono::milliseconds(1));
  if (quarantine.count() <= 0 || quarantine > kMaxJoinTimeout) {
    why = "a bad rendezvous join: quarantine_ms " + std::to_string(quarantine.count()) + " (1.." +
          std::to_string(kMaxJoinTimeout.count()) + ")";
    return std::nullopt;
  }
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

std::string encodeAgentReport(const AgentReport& report) {
  json out = {{field::kAgent, report.agent}};
  if (report.restarts_used) {
    out[field::kRestartsUsed] = *report.restarts_used;
  }
  if (report.failure) {
    const WorkerFailureReport& failure = *report.failure;
    json failed = {{field::kRound, failure.round},
                   {field::kRank, failure.rank},
                   {field::kLocalRank, failure.local_rank},
                   {field::kPid, failure.pid},
                   {field::kReason, failure.reason}};
    if (failure.exit_code) {
      failed[field::kExitCode] = *failure.exit_code;
    }
    if (failure.signal) {
      failed[field::kSignal] = *failure.signal;
    }
    out[field::kFailure] = std::move(failed);
  }
  return jsonText(out);
}

std::optional<AgentReport> decodeVerbValue(std::string_view value, std::string& why) {
  if (!value.starts_with('{')) {
    return AgentReport{std::string(value), std::nullopt, std::nullopt};
  }
  std::string not_json;
  const json in = parseJson(value, &not_json);
  if (in.is_discarded()) {
    why = "a bad rendezvous report: " + not_json;
    return std::nullopt;
  }
  AgentReport report;
  try {
    report.agent = in.at(field::kAgent).get<std::string>();
    if (in.contains(field::kRestartsUsed)) {
      report.restarts_used = intField(in, field::kRestartsUsed);
    }
    if (in.contains(field::kFailure)) {
      const json& failed = in.at(field::kFailure);
      WorkerFailureReport failure;
      failure.round = failed.at(field::kRound).get<std::int64_t>();
      failure.rank = intField(failed, field::kRank);
      failure.local_rank = intField(failed, field::kLocalRank);
      failure.pid = failed.at(field::kPid).get<std::int64_t>();
      failure.reason = failed.at(field::kReason).get<std::string>();
      if (failed.contains(field::kExitCode)) {
        failure.exit_code = intField(failed, field::kExitCode);
      }
      if (failed.contains(field::kSignal)) {
        failure.signal = intField(failed, field::kSignal);
      }
      report.failure = std::move(failure);
    }
  } catch (const std::exception& error) {  // json's, and intField's out_of_range
    why = std::string("a bad rendezvous report: ") + error.what();
    return std::nullopt;
  }
  return report;
}

std::string encodeEventAck(const EventAck& ack) {
  return jsonText(
      json{{field::kAgent, ack.agent}, {field::kSession, ack.session}, {field::kRead, ack.read}});
}

std::optional<EventAck> decodeEventAck(std::string_view text, std::string& why) {
  std::string not_json;
  const json in = parseJson(text, &not_json);
  if (in.is_discarded()) {
    why = "a bad rendezvous ack: " + not_json;
    return std::nullopt;
  }
  EventAck ack;
  try {
    ack.agent = in.at(field::kAgent).get<std::string>();
    ack.session = in.at(field::kSession).get<std::int64_t>();
    ack.read = in.at(field::kRead).get<std::int64_t>();
  } catch (const std::exception& error) {  // json's
    why = std::string("a bad rendezvous ack: ") + error.what();
    return std::nullopt;
  }
  if (ack.session < 0 || ack.read < 0) {
    why = "a bad rendezvous ack: a negative session or index";
    return std::nullopt;
  }
  return ack;
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
    out[field::kRendezvousHost] = event.rendezvous_host;
    if (event.reports) {
      out[field::kReports] = true;
    }
    if (event.acks) {
      out[field::kAcks] = true;
    }
  }
  if (event.failed_on) {
    out[field::kFailedOn] = *event.failed_on;
  }
  if (event.type == EventType::kError) {
    out[field::kMessage] = event.message;
  }
  if (event.type == EventType::kSpare && event.quarantine) {
    out[field::kRound] = event.round;
    out[field::kQuarantine] = {{field::kHost, event.quarantine->host},
                               {field::kFailures, event.quarantine->failures},
                               {field::kLeftMs, event.quarantine->left_ms}};
  }
  return jsonText(out);
}

Event decodeEvent(std::string_view text) {
  const json in = parseJson(text);
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
      event.group_rank = intField(in, field::kGroupRank);
      event.group_world_size = intField(in, field::kGroupWorldSize);
      event.base_rank = intField(in, field::kBaseRank);
      event.local_world_size = intField(in, field::kLocalWorldSize);
      event.world_size = intField(in, field::kWorldSize);
      event.store_host = in.at(field::kStoreHost).get<std::string>();
      event.store_port = in.at(field::kStorePort).get<std::uint16_t>();
      event.rendezvous_host = in.at(field::kRendezvousHost).get<std::string>();
      event.reports = in.value(field::kReports, false);
      event.acks = in.value(field::kAcks, false);
    }
    if (in.contains(field::kFailedOn)) {
      event.failed_on = in.at(field::kFailedOn).get<std::string>();
    }
    if (event.type == EventType::kError) {
      event.message = in.value(field::kMessage, std::string("the rendezvous refused this agent"));
    }
    if (event.type == EventType::kSpare && in.contains(field::kQuarantine)) {
      const json& quarantine = in.at(field::kQuarantine);
      event.round = in.at(field::kRound).get<std::int64_t>();
      event.quarantine = HostQuarantine{quarantine.at(field::kHost).get<std::string>(),
                                        intField(quarantine, field::kFailures),
                                        quarantine.at(field::kLeftMs).get<std::int64_t>()};
    }
  } catch (const StoreError&) {
    throw;
  } catch (const std::exception& error) {  // json's, and intField's out_of_range
    throw StoreError("a malformed rendezvous event '" + std::string(text) + "': " + error.what());
  }
  return event;
}

}  // namespace ddprun::proto::rendezvous
