#include "ddprun/launcher/etcd/etcd_client.hpp"

#include <nettle/base64.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "ddprun/proto/json_parse.hpp"
#include "etcd_http.hpp"

namespace ddprun::launcher::etcd {
namespace {

using nlohmann::json;

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) {
    return "";
  }
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::uint16_t parsePort(const std::string& what, const std::string& entry,
                        const std::string& text) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) {
    throw ConfigError(what + ": bad port in '" + entry + "' (want 1-65535)");
  }
  return static_cast<std::uint16_t>(value);
}

// A list with an empty entry: "a,,b", a trailing comma, or nothing at all.
ConfigError emptyMemberError(const std::string& what, const std::string& list) {
  return ConfigError(what + ": empty member in '" + list + "'");
}

Member parseMember(const std::string& what, const std::string& entry) {
  Member member;
  std::optional<std::string> port;
  if (entry.front() == '[') {  // [v6] or [v6]:port
    const auto close = entry.find(']');
    const bool ok = close != std::string::npos && close > 1 &&
                    (close + 1 == entry.size() || entry[close + 1] == ':');
    if (!ok) {
      throw ConfigError(what + ": bad member '" + entry + "' (want [address]:port)");
    }
    member.host = entry.substr(1, close - 1);
    if (close + 1 < entry.size()) {
      port = entry.substr(close + 2);
    }
  } else {
    const auto colon = entry.find(':');
    if (colon != std::string::npos && entry.find(':', colon + 1) != std::string::npos) {
      throw ConfigError(what + ": bad member '" + entry +
                        "' (write an IPv6 address as [address]:port)");
    }
    member.host = entry.substr(0, colon);
    if (colon != std::string::npos) {
      port = entry.substr(colon + 1);
    }
  }
  if (member.host.empty()) {
    throw ConfigError(what + ": bad member '" + entry + "' (no host)");
  }
  if (port) {
    member.port = parsePort(what, entry, *port);
  }
  return member;
}

std::string bytesField(const json& object, const char* name) {
  const auto found = object.find(name);
  return found == object.end() ? std::string() : fromBase64(found->get<std::string>());
}

json parseAnswer(const std::string& path, const std::string& text) {
  std::string why;
  json parsed = proto::parseJson(text, &why);
  if (parsed.is_discarded()) {
    throw StoreError("etcd answered /v3/" + path + " with bad JSON: " + why);
  }
  return parsed;
}

json operationJson(const Operation& operation) {
  if (operation.kind == Operation::Kind::kPut) {
    json put{{"key", toBase64(operation.key)}, {"value", toBase64(operation.value)}};
    if (operation.lease != 0) {
      put["lease"] = std::to_string(operation.lease);
    }
    return {{"request_put", put}};
  }
  json range{{"key", toBase64(operation.key)}};
  if (operation.kind == Operation::Kind::kDeletePrefix) {
    range["range_end"] = toBase64(detail::prefixEnd(operation.key));
  }
  return {{"request_delete_range", range}};
}

json compareJson(const Compare& compare) {
  const bool create = compare.target == Compare::Target::kCreateRevision;
  return {{"key", toBase64(compare.key)},
          {"result", "EQUAL"},
          {"target", create ? "CREATE" : "MOD"},
          {create ? "create_revision" : "mod_revision", std::to_string(compare.revision)}};
}

// Reads, renewals, revocations and lease queries: sent twice, they do what they did once.
bool safeToRepeat(const std::string& target) {
  return target == "/v3/kv/range" || target == "/v3/lease/keepalive" ||
         target == "/v3/lease/revoke" || target == "/v3/lease/timetolive";
}

}  // namespace

namespace detail {

// etcd's JSON writes 64-bit numbers as strings and leaves out default values.
std::int64_t int64Field(const nlohmann::json& object, const char* name) {
  const auto found = object.find(name);
  if (found == object.end()) {
    return 0;
  }
  if (found->is_number_integer()) {
    return found->get<std::int64_t>();
  }
  const std::string text = found->get<std::string>();
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    throw StoreError(std::string("etcd answered a bad number in '") + name + "': " + text);
  }
  return value;
}

std::int64_t headerRevision(const nlohmann::json& answer) {
  const auto header = answer.find("header");
  return header == answer.end() ? 0 : int64Field(*header, "revision");
}

KeyValue keyValueFromJson(const nlohmann::json& kv) {
  KeyValue result;
  result.key = bytesField(kv, "key");
  result.value = bytesField(kv, "value");
  result.create_revision = int64Field(kv, "create_revision");
  result.mod_revision = int64Field(kv, "mod_revision");
  result.lease = int64Field(kv, "lease");
  return result;
}

}  // namespace detail

using detail::headerRevision;
using detail::int64Field;
using detail::keyValueFromJson;

std::vector<Member> parseMembers(const std::string& what, const std::string& list) {
  std::vector<Member> members;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = std::min(list.find(',', start), list.size());
    const std::string entry = trim(list.substr(start, comma - start));
    if (entry.empty()) {
      throw emptyMemberError(what, list);
    }
    members.push_back(parseMember(what, entry));
    start = comma + 1;
  }
  return members;
}

// Idle connections per member. The cap bounds what a burst of concurrent
// calls leaves open; a call that finds none idle opens one.
struct Client::IdleConnections {
  static constexpr std::size_t kPerMember = 4;
  std::mutex mutex;
  std::vector<std::vector<std::unique_ptr<detail::Connection>>> by_member;
};

Client::Client(ClientOptions options)
    : options_(std::move(options)),
      tls_(detail::loadTlsContext(options_)),
      idle_(std::make_unique<IdleConnections>()) {
  DDPRUN_ASSERT(!options_.members.empty(), "an etcd client needs at least one member");
  idle_->by_member.resize(options_.members.size());
}

Client::~Client() = default;

std::unique_ptr<detail::Connection> Client::newConnection(std::size_t index) {
  return detail::newConnection(options_, options_.members.at(index), tls_);
}

std::unique_ptr<detail::Connection> Client::openConnection(std::size_t index,
                                                           detail::Clock::time_point deadline) {
  auto connection = newConnection(index);
  connections_opened_.fetch_add(1);
  connection->open(deadline);
  return connection;
}

std::unique_ptr<detail::Connection> Client::takeIdle(std::size_t index) {
  std::lock_guard lock(idle_->mutex);
  auto& idle = idle_->by_member[index];
  while (!idle.empty()) {
    auto connection = std::move(idle.back());
    idle.pop_back();
    if (!connection->closedWhileIdle()) {
      return connection;
    }
  }
  return nullptr;
}

void Client::giveBack(std::size_t index, std::unique_ptr<detail::Connection> connection) {
  std::lock_guard lock(idle_->mutex);
  auto& idle = idle_->by_member[index];
  if (idle.size() < IdleConnections::kPerMember) {
    idle.push_back(std::move(connection));
  }
}

std::string Client::postTo(std::size_t index, const std::string& target, const std::string& body) {
  const auto deadline = detail::Clock::now() + options_.request_timeout;
  auto connection = takeIdle(index);
  const bool reused = connection != nullptr;
  if (!reused) {
    connection = openConnection(index, deadline);
  }
  detail::HttpAnswer answer;
  try {
    answer = connection->post(target, body, deadline);
  } catch (const detail::MemberFailure&) {
    // The member may have closed the idle connection just as the request
    // went out. Only a call that is safe to run twice is sent again on a new
    // connection (as Go's HTTP client does); a put or txn fails over as any
    // broken call does.
    if (!reused || !safeToRepeat(target)) {
      throw;
    }
    connection = openConnection(index, deadline);
    answer = connection->post(target, body, deadline);
  }
  const auto refusal = detail::checkAnswer(options_.members[index], target, answer);
  if (connection->reusable()) {
    giveBack(index, std::move(connection));
  }
  if (refusal) {
    throw detail::MemberFailure(*refusal);
  }
  return std::move(answer.body);
}

std::string Client::describe() const {
  std::string text;
  for (const auto& member : options_.members) {
    text += (text.empty() ? "" : ",") + detail::describeMember(member);
  }
  return text;
}

std::string Client::post(const std::string& path, const std::string& body) {
  const std::string target = "/v3/" + path;
  const std::size_t count = options_.members.size();
  const std::size_t first = current_.load();
  std::vector<std::string> failures;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t index = (first + i) % count;
    try {
      std::string answer = postTo(index, target, body);
      current_.store(index);
      return answer;
    } catch (const detail::MemberFailure& e) {
      failures.push_back(detail::describeMember(options_.members[index]) + ": " + e.what());
    }
  }
  throw EtcdUnavailable(detail::noMemberServed(describe(), target, failures));
}

Range Client::get(const std::string& key) {
  const json answer =
      parseAnswer("kv/range", post("kv/range", json{{"key", toBase64(key)}}.dump()));
  Range range{{}, headerRevision(answer)};
  for (const auto& kv : answer.value("kvs", json::array())) {
    range.kvs.push_back(keyValueFromJson(kv));
  }
  return range;
}

Range Client::getPrefix(const std::string& prefix, Read read) {
  json request{{"key", toBase64(prefix)}, {"range_end", toBase64(detail::prefixEnd(prefix))}};
  if (read == Read::kSerializable) {
    request["serializable"] = true;
  }
  const json answer = parseAnswer("kv/range", post("kv/range", request.dump()));
  Range range{{}, headerRevision(answer)};
  for (const auto& kv : answer.value("kvs", json::array())) {
    range.kvs.push_back(keyValueFromJson(kv));
  }
  return range;
}

std::int64_t Client::put(const std::string& key, const std::string& value, std::int64_t lease) {
  json request{{"key", toBase64(key)}, {"value", toBase64(value)}};
  if (lease != 0) {
    request["lease"] = std::to_string(lease);
  }
  return headerRevision(parseAnswer("kv/put", post("kv/put", request.dump())));
}

TxnResult Client::txn(const std::vector<Compare>& compares, const std::vector<Operation>& success,
                      const std::vector<Operation>& failure) {
  json request{{"compare", json::array()}, {"success", json::array()}, {"failure", json::array()}};
  for (const auto& compare : compares) {
    request["compare"].push_back(compareJson(compare));
  }
  for (const auto& operation : success) {
    request["success"].push_back(operationJson(operation));
  }
  for (const auto& operation : failure) {
    request["failure"].push_back(operationJson(operation));
  }
  const json answer = parseAnswer("kv/txn", post("kv/txn", request.dump()));
  return {answer.value("succeeded", false), headerRevision(answer)};
}

std::int64_t Client::grantLease(std::chrono::seconds ttl) {
  const json answer =
      parseAnswer("lease/grant", post("lease/grant", json{{"TTL", ttl.count()}}.dump()));
  const std::int64_t id = int64Field(answer, "ID");
  if (id == 0) {
    throw StoreError("etcd at " + describe() + " granted no lease: " + answer.dump());
  }
  return id;
}

bool Client::keepAlive(std::int64_t lease) {
  // A streaming call in etcd's API; the gateway answers one renewal per
  // request object, so one object in, one out.
  const std::string text = post("lease/keepalive", json{{"ID", std::to_string(lease)}}.dump());
  const json answer = parseAnswer("lease/keepalive", text.substr(0, text.find('\n')));
  return int64Field(answer.value("result", json::object()), "TTL") > 0;
}

void Client::revokeLease(std::int64_t lease) {
  try {
    post("lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  } catch (const detail::GatewayError& e) {
    if (e.code != 5) {
      throw;  // NOT_FOUND: already expired or revoked, as asked
    }
  }
}

std::optional<Client::LeaseTime> Client::timeToLive(std::int64_t lease) {
  try {
    const json answer = parseAnswer(
        "lease/timetolive", post("lease/timetolive", json{{"ID", std::to_string(lease)}}.dump()));
    const std::int64_t ttl = int64Field(answer, "TTL");
    if (ttl == -1 && int64Field(answer, "grantedTTL") == 0) {
      return std::nullopt;  // etcd 3.4's answer for a lease it does not have
    }
    return LeaseTime{ttl, int64Field(answer, "grantedTTL")};
  } catch (const detail::GatewayError& e) {
    if (e.code != 5) {
      throw;
    }
    return std::nullopt;  // NOT_FOUND: expired and revoked, or revoked
  }
}

// Encoding and decoding are nettle's (whose decoder also refuses padded text
// with leftover bits set); the check that the text is padded, in whole
// quads of the alphabet, is ours.
std::string toBase64(const std::string& bytes) {
  std::string text(BASE64_ENCODE_RAW_LENGTH(bytes.size()), '\0');
  base64_encode_raw(text.data(), bytes.size(), reinterpret_cast<const std::uint8_t*>(bytes.data()));
  return text;
}

std::string fromBase64(const std::string& text) {
  const auto isAlphabet = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '/';
  };
  const std::size_t padding = text.size() - text.find_last_not_of('=') - 1;
  const bool canonical =
      text.size() % 4 == 0 && (text.empty() || padding <= 2) &&
      std::all_of(text.begin(),
                  text.end() - static_cast<std::ptrdiff_t>(text.empty() ? 0 : padding), isAlphabet);
  std::string bytes(BASE64_DECODE_LENGTH(text.size()), '\0');
  std::size_t length = bytes.size();
  base64_decode_ctx decoder;
  base64_decode_init(&decoder);
  const bool decoded =
      canonical &&
      base64_decode_update(&decoder, &length, reinterpret_cast<std::uint8_t*>(bytes.data()),
                           text.size(), text.data()) == 1 &&
      base64_decode_final(&decoder) == 1;
  if (!decoded) {
    throw Error("not base64: '" + (text.size() > 40 ? text.substr(0, 40) + "..." : text) + "'");
  }
  bytes.resize(length);
  return bytes;
}

}  // namespace ddprun::launcher::etcd
