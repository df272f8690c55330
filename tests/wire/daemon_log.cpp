#include "daemon_log.hpp"

#include <algorithm>
#include <cctype>

namespace ddprun::wire_test {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// ":<port>" not followed by another digit, so port 5432 does not match 54321.
bool namesPort(std::string_view line, std::uint16_t port) {
  const std::string needle = ":" + std::to_string(port);
  for (std::size_t at = line.find(needle); at != std::string_view::npos;
       at = line.find(needle, at + 1)) {
    const std::size_t end = at + needle.size();
    if (end == line.size() || std::isdigit(static_cast<unsigned char>(line[end])) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<std::string> warningAboutPeer(std::string_view log, std::uint16_t peer_port) {
  std::size_t start = 0;
  while (start < log.size()) {
    std::size_t end = log.find('\n', start);
    if (end == std::string_view::npos) {
      end = log.size();
    }
    const std::string_view line = log.substr(start, end - start);
    if (lower(line).find("warn") != std::string::npos &&
        line.find("127.0.0.1") != std::string_view::npos && namesPort(line, peer_port)) {
      return std::string(line);
    }
    start = end + 1;
  }
  return std::nullopt;
}

bool mentionsAny(std::string_view line, std::initializer_list<std::string_view> words) {
  const std::string haystack = lower(line);
  return std::any_of(words.begin(), words.end(), [&](std::string_view word) {
    return haystack.find(lower(word)) != std::string::npos;
  });
}

}  // namespace ddprun::wire_test
