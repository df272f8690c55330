#include "etcd_http.hpp"

#include <nlohmann/json.hpp>
#include <optional>

#include "beast_connection.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/json_parse.hpp"

namespace ddprun::launcher::etcd::detail {
namespace {

// gRPC status codes that mean "not now, not here" (UNAVAILABLE: no leader,
// stopping; DEADLINE_EXCEEDED; RESOURCE_EXHAUSTED: too many requests).
bool memberCannotServe(int grpc_code, unsigned http_status) {
  if (grpc_code < 0) {
    return http_status >= 500;
  }
  return grpc_code == 14 || grpc_code == 4 || grpc_code == 8;
}

std::string firstLine(const std::string& text) {
  const std::string line = text.substr(0, text.find_first_of("\r\n"));
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

}  // namespace

std::optional<std::string> checkAnswer(const Member& member, const std::string& target,
                                       const HttpAnswer& answer) {
  const auto parsed = proto::parseJson(answer.body);
  int code = -1;
  std::string message;
  if (parsed.is_object() && parsed.contains("error")) {
    const auto& error = parsed["error"];
    if (error.is_object()) {  // streamed: {"error":{"grpc_code":14,"message":"..."}}
      code = error.value("grpc_code", -1);
      message = error.value("message", "");
    } else if (error.is_string()) {  // {"error":"...","code":14,"message":"..."}
      code = parsed.value("code", -1);
      message = error.get<std::string>();
    }
  }
  if (answer.status == 200 && message.empty() && code < 0) {
    return std::nullopt;
  }
  if (message.empty()) {
    message = "HTTP " + std::to_string(answer.status) + ": " + firstLine(answer.body);
  }
  if (memberCannotServe(code, answer.status)) {
    return message;
  }
  throw GatewayError("etcd at " + describeMember(member) + ": " + target + ": " + message, code);
}

std::string noMemberServed(const std::string& members, const std::string& target,
                           const std::vector<std::string>& failures) {
  std::string line = "etcd at " + members + ": no member served " + target + " (";
  for (std::size_t i = 0; i < failures.size(); ++i) {
    line += (i == 0 ? "" : "; ") + failures[i];
  }
  return line + ")";
}

std::string prefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (end.empty()) {
    return std::string(1, '\0');  // etcd: every key from `prefix` on
  }
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

std::unique_ptr<Connection> newConnection(const ClientOptions& options, const Member& member,
                                          const std::shared_ptr<TlsContext>& tls) {
  if (tls) {
    return newTlsConnection(member, tls);
  }
  return std::make_unique<BeastConnection<beast::tcp_stream>>(member, options.request_timeout);
}

}  // namespace ddprun::launcher::etcd::detail
