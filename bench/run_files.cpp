#include "run_files.hpp"

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>
#include <vector>

namespace ddprun::bench {

std::optional<std::int64_t> readNumber(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::int64_t value = 0;
  if (in >> value) {
    return value;
  }
  return std::nullopt;
}

std::optional<std::int64_t> lastStartNs(const std::filesystem::path& dir, int nproc) {
  std::optional<std::int64_t> last;
  for (int rank = 0; rank < nproc; ++rank) {
    const auto start = readNumber(dir / ("start." + std::to_string(rank)));
    if (!start) {
      return std::nullopt;
    }
    last = std::max(last.value_or(*start), *start);
  }
  return last;
}

std::optional<RestartStamps> readRestartStamps(const std::filesystem::path& dir, int nproc) {
  const auto crash = readNumber(dir / "crash");
  std::vector<std::int64_t> starts, terms;
  for (int rank = 0; rank < nproc; ++rank) {
    if (auto start = readNumber(dir / ("start." + std::to_string(rank)))) {
      starts.push_back(*start);
    }
    if (auto term = readNumber(dir / ("term." + std::to_string(rank)))) {
      terms.push_back(*term);
    }
  }
  if (!crash || static_cast<int>(starts.size()) != nproc) {
    return std::nullopt;
  }
  auto ms_after_crash = [&crash](std::int64_t ns) {
    return static_cast<double>(ns - *crash) / 1e6;
  };
  RestartStamps stamps;
  stamps.crash_ns = *crash;
  stamps.first_start_ms = ms_after_crash(*std::min_element(starts.begin(), starts.end()));
  stamps.last_start_ms = ms_after_crash(*std::max_element(starts.begin(), starts.end()));
  if (!terms.empty()) {
    stamps.first_term_ms = ms_after_crash(*std::min_element(terms.begin(), terms.end()));
  }
  return stamps;
}

std::string tailOf(const std::filesystem::path& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) {
      last.pop_front();
    }
  }
  std::ostringstream out;
  for (const auto& kept : last) {
    out << "  " << kept << '\n';
  }
  return out.str();
}

}  // namespace ddprun::bench
