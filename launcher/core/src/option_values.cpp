#include "ddprun/launcher/core/option_values.hpp"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <regex>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == separator) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// Like Python's int(): blanks around and a leading sign are accepted.
std::optional<long long> toInteger(std::string_view text) {
  text = trim(text);
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') {
      return std::nullopt;
    }
  }
  long long value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) {
    return std::nullopt;
  }
  return value;
}

struct SignalName {
  const char* name;
  int number;
};

// The names Python's signal module resolves with getattr(signal, name) on Linux.
std::optional<int> signalNumber(std::string_view name) {
  static const SignalName kSignals[] = {
      {"SIGABRT", SIGABRT},     {"SIGALRM", SIGALRM},     {"SIGBUS", SIGBUS},
      {"SIGCHLD", SIGCHLD},     {"SIGCLD", SIGCHLD},      {"SIGCONT", SIGCONT},
      {"SIGFPE", SIGFPE},       {"SIGHUP", SIGHUP},       {"SIGILL", SIGILL},
      {"SIGINT", SIGINT},       {"SIGIO", SIGIO},         {"SIGIOT", SIGIOT},
      {"SIGKILL", SIGKILL},     {"SIGPIPE", SIGPIPE},     {"SIGPOLL", SIGPOLL},
      {"SIGPROF", SIGPROF},     {"SIGPWR", SIGPWR},       {"SIGQUIT", SIGQUIT},
      {"SIGSEGV", SIGSEGV},     {"SIGSTKFLT", SIGSTKFLT}, {"SIGSTOP", SIGSTOP},
      {"SIGSYS", SIGSYS},       {"SIGTERM", SIGTERM},     {"SIGTRAP", SIGTRAP},
      {"SIGTSTP", SIGTSTP},     {"SIGTTIN", SIGTTIN},     {"SIGTTOU", SIGTTOU},
      {"SIGURG", SIGURG},       {"SIGUSR1", SIGUSR1},     {"SIGUSR2", SIGUSR2},
      {"SIGVTALRM", SIGVTALRM}, {"SIGWINCH", SIGWINCH},   {"SIGXCPU", SIGXCPU},
      {"SIGXFSZ", SIGXFSZ},
  };
  for (const auto& entry : kSignals) {
    if (name == entry.name) {
      return entry.number;
    }
  }
  // SIGRTMIN/SIGRTMAX are run-time values in glibc, not constants.
  if (name == "SIGRTMIN") {
    return SIGRTMIN;
  }
  if (name == "SIGRTMAX") {
    return SIGRTMAX;
  }
  return std::nullopt;
}

Std toStd(std::string_view what, std::string_view whole, std::string_view digit) {
  if (digit.size() != 1 || digit[0] < '0' || digit[0] > '3') {
    failValue(what, whole, "each value must be 0 (none), 1 (stdout), 2 (stderr) or 3 (both)");
  }
  return static_cast<Std>(digit[0] - '0');
}

}  // namespace

Std StdSpec::forLocalRank(int local_rank) const {
  if (const auto* uniform = std::get_if<Std>(&value)) {
    return *uniform;
  }
  const auto& per_rank = std::get<std::map<int, Std>>(value);
  const auto found = per_rank.find(local_rank);
  return found == per_rank.end() ? Std::kNone : found->second;
}

void failValue(std::string_view what, std::string_view text, std::string_view why) {
  std::string message(what);
  message += " '";
  message += text;
  message += "': ";
  message += why;
  throw ConfigError(message);
}

int parseInt(std::string_view what, std::string_view text, int min, int max) {
  const auto value = toInteger(text);
  if (!value) {
    failValue(what, text, "not an integer");
  }
  if (*value < min || *value > max) {
    const std::string range =
        max == std::numeric_limits<int>::max()
            ? "must be >= " + std::to_string(min)
            : "must be between " + std::to_string(min) + " and " + std::to_string(max);
    failValue(what, text, range);
  }
  return static_cast<int>(*value);
}

namespace {

double parseFiniteDouble(std::string_view what, std::string_view text) {
  const std::string copy(trim(text));
  char* end = nullptr;
  const double value = copy.empty() ? 0.0 : std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value)) {
    failValue(what, text, "not a number");
  }
  return value;
}

}  // namespace

double parsePositiveDouble(std::string_view what, std::string_view text) {
  const double value = parseFiniteDouble(what, text);
  if (value <= 0) {
    failValue(what, text, "must be greater than 0");
  }
  return value;
}

double parseNonNegativeDouble(std::string_view what, std::string_view text) {
  const double value = parseFiniteDouble(what, text);
  if (value < 0) {
    failValue(what, text, "must be 0 or more");
  }
  return value;
}

bool parseEnvBool(std::string_view what, std::string_view text) {
  const auto value = toInteger(text);
  if (!value) {
    failValue(what, text, "must be an integer (0 = off, non-zero = on)");
  }
  return *value != 0;
}

std::pair<int, int> parseNnodes(std::string_view what, std::string_view text) {
  const auto parts = split(text, ':');
  if (parts.size() > 2) {
    failValue(what, text, "expected N or MIN:MAX");
  }
  const auto toCount = [&](std::string_view part) {
    const auto value = toInteger(part);
    if (!value) {
      failValue(what, text, "expected N or MIN:MAX with integers");
    }
    if (*value <= 0 || *value > std::numeric_limits<int>::max()) {
      failValue(what, text, "node counts must be greater than 0");
    }
    return static_cast<int>(*value);
  };
  const int min = toCount(parts.front());
  const int max = toCount(parts.back());
  if (min > max) {
    failValue(what, text, "MIN must not exceed MAX");
  }
  return {min, max};
}

NprocPerNode parseNprocPerNode(std::string_view what, std::string_view text) {
  using Kind = NprocPerNode::Kind;
  if (text == "cpu") {
    return {Kind::kCpu, 0};
  }
  if (text == "gpu") {
    return {Kind::kGpu, 0};
  }
  if (text == "xpu") {  // torchrun's, never offered by --help or completion
    failValue(what, text, "Intel XPUs are not supported by ddprun; give a count, cpu, gpu or auto");
  }
  if (text == "auto") {
    return {Kind::kAuto, 0};
  }
  if (!toInteger(text)) {
    failValue(what, text, "expected a positive integer or cpu, gpu, auto");
  }
  return {Kind::kCount, parseInt(what, text, 1, std::numeric_limits<int>::max())};
}

StdSpec parseStdSpec(std::string_view what, std::string_view text) {
  static const std::regex kValue("^[0-3]$");
  static const std::regex kMapping(R"(^(\d:[0-3],)*(\d:[0-3])$)");
  const std::string copy(text);
  if (std::regex_match(copy, kValue)) {
    return {toStd(what, text, text)};
  }
  if (!std::regex_match(copy, kMapping)) {
    failValue(what, text, "expected 0-3 or a map LOCAL_RANK:0-3,... with single-digit ranks");
  }
  std::map<int, Std> per_rank;
  for (const auto item : split(text, ',')) {
    per_rank[item[0] - '0'] = toStd(what, text, item.substr(2));
  }
  return {per_rank};
}

std::map<std::string, std::string> parseRdzvConf(std::string_view what, std::string_view text) {
  std::map<std::string, std::string> conf;
  if (trim(text).empty()) {
    return conf;
  }
  for (const auto item : split(trim(text), ',')) {
    const auto equals = item.find('=');
    const auto key = trim(item.substr(0, equals));
    if (key.empty()) {
      failValue(what, text, "expected KEY=VALUE,... (an item has no key)");
    }
    const auto value =
        equals == std::string_view::npos ? std::string_view{} : trim(item.substr(equals + 1));
    if (value.empty()) {
      failValue(what, text, "option '" + std::string(key) + "' has no value");
    }
    conf[std::string(key)] = std::string(value);
  }
  return conf;
}

std::string formatEndpoint(std::string_view host, int port) {
  const bool v6 = host.find(':') != std::string_view::npos;
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

namespace {

// An IPv6 address with its zone, "fe80::1%eth0": a link-local address means
// nothing without the interface it is reached through (RFC 4007).
bool isScopedIpv6(std::string_view host) {
  const auto percent = host.find('%');
  if (percent == std::string_view::npos) {
    return false;
  }
  static const std::regex kZone("^[A-Za-z0-9_.-]+$");
  in6_addr address{};
  return ::inet_pton(AF_INET6, std::string(host.substr(0, percent)).c_str(), &address) == 1 &&
         std::regex_match(std::string(host.substr(percent + 1)), kZone);
}

}  // namespace

Endpoint parseEndpoint(std::string_view what, std::string_view text, int default_port) {
  const auto endpoint = trim(text);
  if (endpoint.empty()) {
    return {"localhost", default_port};
  }
  std::string_view host = endpoint;
  std::optional<std::string_view> port_text;
  const bool bracketed = endpoint.front() == '[' && endpoint.back() == ']';
  if (!bracketed) {
    const auto colon = endpoint.rfind(':');
    if (colon != std::string_view::npos) {
      host = endpoint.substr(0, colon);
      port_text = endpoint.substr(colon + 1);
    }
  }
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = default_port;
  if (port_text) {
    static const std::regex kPort("^[0-9]{1,5}$");
    if (!std::regex_match(std::string(*port_text), kPort) ||
        std::stoi(std::string(*port_text)) >= 65536) {
      failValue(what, text, "the port must be an integer between 0 and 65535");
    }
    port = std::stoi(std::string(*port_text));
  }
  static const std::regex kHost("^[A-Za-z0-9_.:-]+$");
  if (!std::regex_match(std::string(host), kHost) && !isScopedIpv6(host)) {
    failValue(what, text,
              "the host must be a DNS name, an IPv4 address or an IPv6 address (a link-local "
              "one with its interface: fe80::1%eth0)");
  }
  return {std::string(host), port};
}

std::vector<int> parseSignals(std::string_view what, std::string_view text) {
  std::vector<int> numbers;
  for (const auto item : split(text, ',')) {
    const auto name = trim(item);
    const auto number = signalNumber(name);
    if (!number) {
      failValue(what, text,
                "unknown signal name '" + std::string(name) + "' (use names like SIGUSR1)");
    }
    if (*number == SIGKILL || *number == SIGSTOP) {
      failValue(what, text, std::string(name) + " cannot be caught");
    }
    numbers.push_back(*number);
  }
  return numbers;
}

std::set<int> parseRankList(std::string_view what, std::string_view text,
                            std::string_view ranks_named) {
  std::set<int> ranks;
  for (const auto item : split(text, ',')) {
    const auto value = toInteger(item);
    if (!value || *value < 0 || *value > std::numeric_limits<int>::max()) {
      failValue(
          what, text,
          "expected a comma-separated list of " + std::string(ranks_named) + " (integers >= 0)");
    }
    ranks.insert(static_cast<int>(*value));
  }
  return ranks;
}

std::vector<std::string> parseFilterList(std::string_view text) {
  std::vector<std::string> filters;
  std::string current;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      current += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      current += ',';
      ++i;
    } else {
      if (!current.empty()) {
        filters.push_back(current);
      }
      current.clear();
    }
  }
  if (!current.empty()) {
    filters.push_back(current);
  }
  return filters;
}

StartMethod parseStartMethod(std::string_view what, std::string_view text) {
  if (text == "spawn") {
    return StartMethod::kSpawn;
  }
  if (text == "fork") {
    return StartMethod::kFork;
  }
  if (text == "forkserver") {
    return StartMethod::kForkserver;
  }
  failValue(what, text, "expected spawn, fork or forkserver");
}

std::string_view numaBindingName(NumaBinding binding) {
  switch (binding) {
    case NumaBinding::kNode:
      return "node";
    case NumaBinding::kSocket:
      return "socket";
    case NumaBinding::kExclusive:
      return "exclusive";
    case NumaBinding::kCoreComplex:
      break;
  }
  return "core-complex";
}

NumaBinding parseNumaBinding(std::string_view what, std::string_view text) {
  if (text == "node") {
    return NumaBinding::kNode;
  }
  if (text == "socket") {
    return NumaBinding::kSocket;
  }
  if (text == "exclusive") {
    return NumaBinding::kExclusive;
  }
  if (text == "core-complex") {
    return NumaBinding::kCoreComplex;
  }
  failValue(what, text, "expected node, socket, exclusive or core-complex");
}

std::string formatSeconds(std::chrono::milliseconds duration) {
  const long long ms = duration.count();
  if (ms % 1000 == 0) {
    return std::to_string(ms / 1000) + " s";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", static_cast<double>(ms) / 1000.0);
  return text;
}

}  // namespace ddprun::launcher
