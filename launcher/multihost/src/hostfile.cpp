#include "ddprun/launcher/multihost/hostfile.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "ddprun/launcher/core/regular_file.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

constexpr std::size_t kMaxHostfileBytes = 1 << 20;
// More slots than any machine has GPUs or cores: a typo, refused before a
// selection would list them all.
constexpr int kMaxSlots = 4096;

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) {
    return {};
  }
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// A non-negative integer, or -1.
int count(std::string_view text) {
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && value >= 0 ? value : -1;
}

// "HOST slots=N", then anything: the host and its slots; nullopt when the
// line is not that or N is out of range.
std::optional<HostSlots> hostLine(std::string_view line) {
  const auto blank = line.find_first_of(" \t");
  if (blank == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view rest = trimmed(line.substr(blank));
  constexpr std::string_view kSlots = "slots=";
  if (!rest.starts_with(kSlots)) {
    return std::nullopt;
  }
  rest.remove_prefix(kSlots.size());
  const int slots = count(rest.substr(0, rest.find_first_of(" \t")));
  if (slots < 1 || slots > kMaxSlots) {
    return std::nullopt;
  }
  return HostSlots{std::string(line.substr(0, blank)), slots};
}

[[noreturn]] void badSpec(std::string_view what, std::string_view spec, const std::string& why) {
  throw ConfigError(std::string(what) + " '" + proto::visible(spec) + "': " + why);
}

// "HOST[:SLOT,...]" of one selection; an empty slot list: the whole host.
std::pair<std::string, std::vector<int>> hostAndSlots(std::string_view what, std::string_view spec,
                                                      std::string_view item) {
  const auto colon = item.find(':');
  const std::string host(item.substr(0, colon));
  if (host.empty()) {
    badSpec(what, spec, "a host name is missing (HOST[:SLOT,...][@HOST...])");
  }
  std::vector<int> slots;
  if (colon != std::string_view::npos) {
    std::string_view list = item.substr(colon + 1);
    while (true) {
      const auto comma = list.find(',');
      const int slot = count(list.substr(0, comma));
      if (slot < 0) {
        badSpec(what, spec, "slots are integers >= 0, separated by ','");
      }
      slots.push_back(slot);
      if (comma == std::string_view::npos) {
        break;
      }
      list = list.substr(comma + 1);
    }
  }
  return {host, slots};
}

// What a selection starts from: nothing to include into, or every slot to
// exclude from.
std::map<std::string, std::set<int>> startingSlots(const std::vector<HostSlots>& hosts,
                                                   bool including) {
  std::map<std::string, std::set<int>> kept;
  for (const HostSlots& host : hosts) {
    for (int slot = 0; !including && slot < host.slots; ++slot) {
      kept[host.host].insert(slot);
    }
  }
  return kept;
}

// One "HOST[:SLOT,...]" of a selection, checked against the hostfile and
// applied to `kept`.
void applyItem(std::string_view what, std::string_view spec, std::string_view item,
               const std::vector<HostSlots>& hosts, bool including,
               std::map<std::string, std::set<int>>& kept) {
  auto parsed = hostAndSlots(what, spec, item);
  const std::string& host = parsed.first;
  std::vector<int>& slots = parsed.second;
  const auto known = std::find_if(hosts.begin(), hosts.end(),
                                  [&](const HostSlots& entry) { return entry.host == host; });
  if (known == hosts.end()) {
    badSpec(what, spec, "host " + proto::visible(host) + " is not in the hostfile");
  }
  for (int slot : slots) {
    if (slot >= known->slots) {
      badSpec(what, spec,
              proto::visible(host) + " has slots 0.." + std::to_string(known->slots - 1) +
                  ", not " + std::to_string(slot));
    }
  }
  if (slots.empty()) {  // the whole host
    for (int slot = 0; slot < known->slots; ++slot) {
      slots.push_back(slot);
    }
  }
  for (int slot : slots) {
    if (including) {
      kept[host].insert(slot);
    } else {
      kept[host].erase(slot);
    }
  }
}

}  // namespace

std::vector<HostSlots> parseHostfile(std::string_view text, const std::string& path) {
  std::vector<HostSlots> hosts;
  std::set<std::string> seen;
  std::istringstream lines{std::string(text)};
  int number = 0;
  for (std::string raw; std::getline(lines, raw);) {
    ++number;
    const std::string_view line = trimmed(raw);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    const std::string where = "hostfile " + proto::visible(path) + " line " +
                              std::to_string(number) + " '" + proto::visible(line) + "'";
    const auto host = hostLine(line);
    if (!host) {
      throw ConfigError(where +
                        ": expected 'HOST slots=N' with 1 <= N <= " + std::to_string(kMaxSlots));
    }
    if (host->host.front() == '-') {
      throw ConfigError(where + ": a host name cannot start with '-' (ssh would read an option)");
    }
    if (!seen.insert(host->host).second) {
      throw ConfigError(where + ": " + host->host + " is listed twice");
    }
    hosts.push_back(*host);
  }
  if (hosts.empty()) {
    throw ConfigError("hostfile " + proto::visible(path) +
                      ": no host in it (lines 'HOST slots=N'; '#' starts a comment)");
  }
  return hosts;
}

std::vector<HostSlots> readHostfile(const std::string& path) {
  const RegularFileRead read = readRegularFile(path, kMaxHostfileBytes, Links::kFollow);
  const std::string named = "--hostfile " + proto::visible(path);
  if (!read.found) {
    throw ConfigError(named + ": no such file");
  }
  if (!read.why.empty()) {
    throw ConfigError(named + ": not read: " + read.why);
  }
  if (read.over_cap) {
    throw ConfigError(named + ": over 1 MiB: not a hostfile");
  }
  return parseHostfile(read.text, path);
}

std::vector<SelectedHost> selectHosts(const std::vector<HostSlots>& hosts, std::string_view include,
                                      std::string_view exclude) {
  if (!include.empty() && !exclude.empty()) {
    throw ConfigError("--include and --exclude cannot be used together");
  }
  const bool including = !include.empty();
  const std::string_view what = including ? "--include" : "--exclude";
  const std::string_view spec = including ? include : exclude;
  std::map<std::string, std::set<int>> kept = startingSlots(hosts, including);
  for (std::string_view rest = spec; !rest.empty();) {
    const auto at = rest.find('@');
    applyItem(what, spec, rest.substr(0, at), hosts, including, kept);
    rest = at == std::string_view::npos ? std::string_view() : rest.substr(at + 1);
    if (at != std::string_view::npos && rest.empty()) {
      badSpec(what, spec, "a host name is missing (HOST[:SLOT,...][@HOST...])");
    }
  }
  std::vector<SelectedHost> selected;
  for (const HostSlots& host : hosts) {
    const auto& slots = kept[host.host];
    if (!slots.empty()) {
      selected.push_back({host.host, std::vector<int>(slots.begin(), slots.end())});
    }
  }
  if (selected.empty()) {
    badSpec(what, spec, "leaves no slot of any host");
  }
  return selected;
}

}  // namespace ddprun::launcher
