#include "ddprun/launcher/watchdogs/progress_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ddprun/launcher/core/owned_fd.hpp"
#include "ddprun/proto/json_parse.hpp"

namespace ddprun::launcher {
namespace {

// A progress line is flat; deeper nesting is refused before it is built.
constexpr int kMaxProgressDepth = 4;

}  // namespace

std::optional<ProgressLine> parseProgressLine(std::string_view line) {
  // Most lines of a busy worker are progress; anything else is rare, and
  // cheap to refuse before parsing.
  if (line.find("progress") == std::string_view::npos &&
      line.find("snapshot") == std::string_view::npos) {
    return std::nullopt;
  }
  const nlohmann::json parsed = proto::parseJson<nlohmann::json>(line, nullptr, kMaxProgressDepth);
  if (!parsed.is_object()) {
    return std::nullopt;
  }
  const auto name = parsed.find("name");
  const auto step = parsed.find("step");
  if (name == parsed.end() || (*name != "progress" && *name != "snapshot") ||
      step == parsed.end() || !step->is_number_integer() || step->get<std::int64_t>() < 0) {
    return std::nullopt;
  }
  ProgressLine progress;
  progress.step = step->get<std::int64_t>();
  progress.snapshot = *name == "snapshot";
  const auto ts = parsed.find("ts_monotonic_ns");
  if (ts != parsed.end() && ts->is_number_integer() && ts->get<std::int64_t>() >= 0) {
    progress.ts_ns = ts->get<std::int64_t>();
  }
  return progress;
}

namespace {

// Adds one line to what a chunk has shown; timestamps that are missing or
// go back leave the gaps unknown from there on.
void add(ProgressLines::Seen& seen, const ProgressLine& line) {
  const bool in_order = seen.lines == 0 || (seen.last_ts_ns >= 0 && line.ts_ns >= seen.last_ts_ns);
  if (seen.lines > 0 && in_order) {
    seen.longest_gap_ns = std::max(seen.longest_gap_ns, line.ts_ns - seen.last_ts_ns);
  }
  if (seen.lines == 0) {
    seen.first_ts_ns = line.ts_ns;
  }
  seen.last_ts_ns = in_order ? line.ts_ns : -1;
  ++seen.lines;
  seen.step = line.step;
}

}  // namespace

ProgressLines::Seen ProgressLines::consume(std::string_view bytes) {
  Seen seen;
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, newline);
    if (!dropping_ && partial_.size() + piece.size() <= kMaxLineBytes) {
      partial_.append(piece);
    } else {
      dropping_ = true;
      partial_.clear();
    }
    if (newline == std::string_view::npos) {
      break;  // the line goes on in the next chunk
    }
    if (!dropping_) {
      if (const auto line = parseProgressLine(partial_); line && line->snapshot) {
        seen.snapshot_step = std::max(seen.snapshot_step.value_or(line->step), line->step);
      } else if (line) {
        add(seen, *line);
      }
    }
    partial_.clear();
    dropping_ = false;
    bytes.remove_prefix(newline + 1);
  }
  return seen;
}

void ProgressLines::skipped() {
  partial_.clear();
  dropping_ = true;  // until the next newline: the rest of a line cut in two
}

ProgressLines::Seen ProgressFile::readNew() {
  const OwnedFd file(
      ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  struct stat info {};
  if (file.fd < 0 || ::fstat(file.fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return {};
  }
  if (info.st_size < offset_) {
    offset_ = 0;  // truncated or replaced: its lines start again, from a line's start
    lines_ = ProgressLines();
  }
  const off_t newest = std::max<off_t>(offset_, info.st_size - static_cast<off_t>(kMaxReadBytes));
  if (newest > offset_) {
    lines_.skipped();
  }
  std::string bytes(static_cast<std::size_t>(info.st_size - newest), '\0');
  const ssize_t got = bytes.empty() ? 0 : ::pread(file.fd, bytes.data(), bytes.size(), newest);
  if (got <= 0) {
    offset_ = newest;
    return {};
  }
  offset_ = newest + got;
  return lines_.consume(std::string_view(bytes.data(), static_cast<std::size_t>(got)));
}

}  // namespace ddprun::launcher
