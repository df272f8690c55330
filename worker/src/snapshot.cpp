#include "ddprun/worker/snapshot.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ddprun/proto/json_parse.hpp"

namespace ddprun::worker {
namespace {

constexpr std::string_view kMagicLine = "ddprun-train-snapshot 1\n";
constexpr std::string_view kFormatName = "ddprun-train-snapshot";
constexpr std::string_view kZipMagic = "PK\x03\x04";
// Far above any snapshot train writes; a header claiming more is corrupt.
constexpr uint64_t kMaxHeaderBytes = 64 * 1024;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw SnapshotError("snapshot " + path + ": " + what);
}

std::string errnoText() { return std::strerror(errno); }

uint32_t crc32Of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t offset = 0;
  while (offset < bytes.size()) {
    const auto chunk = static_cast<uInt>(std::min<size_t>(bytes.size() - offset, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + offset), chunk);
    offset += chunk;
  }
  return static_cast<uint32_t>(crc);
}

// ---- payload: a LibTorch archive of model, optimiser and generator state ----

std::string serializePayload(TrainingState state) {
  torch::serialize::OutputArchive root;
  torch::serialize::OutputArchive model;
  torch::serialize::OutputArchive optimizer;
  state.model.save(model);
  state.optimizer.save(optimizer);
  root.write("model", model);
  root.write("optimizer", optimizer);
  root.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  std::string bytes;
  root.save_to([&bytes](const void* data, size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

void deserializePayload(const std::string& path, std::string_view bytes, TrainingState state) {
  try {
    torch::serialize::InputArchive root;
    root.load_from(bytes.data(), bytes.size(), state.device);
    torch::serialize::InputArchive model;
    torch::serialize::InputArchive optimizer;
    root.read("model", model);
    root.read("optimizer", optimizer);
    state.model.load(model);
    state.optimizer.load(optimizer);
    torch::Tensor generator_state;
    root.read("rng_cpu", generator_state);
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(generator_state.to(torch::kCPU));
  } catch (const c10::Error& error) {
    // LibTorch's message is many lines with a C++ backtrace; keep its first.
    std::string message = error.what_without_backtrace();
    message = message.substr(0, message.find('\n'));
    fail(path, "does not fit this model and optimiser: " + message);
  }
}

// ---- the envelope ----

std::string encodeHeader(const SnapshotHeader& header) { return headerJson(header) + "\n"; }

SnapshotHeader decodeHeader(const std::string& path, const std::string& line) {
  const auto json = proto::parseJson(line);
  if (json.is_discarded() || !json.is_object() || json.value("format", "") != kFormatName) {
    fail(path, "header is not a train snapshot header (corrupt file?)");
  }
  try {
    SnapshotHeader header;
    header.task = json.at("task").get<std::string>();
    header.epochs_run = json.at("epochs_run").get<int64_t>();
    header.world_size = json.at("world_size").get<int>();
    header.payload_bytes = json.at("payload_bytes").get<uint64_t>();
    header.payload_crc32 = json.at("payload_crc32").get<uint32_t>();
    if (header.epochs_run < 0) {
      fail(path, "header has a negative epochs_run");
    }
    return header;
  } catch (const nlohmann::json::exception& error) {
    fail(path, std::string("header field missing or mistyped: ") + error.what());
  }
}

std::string readWholeFile(const std::string& path) {
  checkSnapshotPath(path);
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    fail(path, "cannot open: " + errnoText());
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) {
    fail(path, "read error: " + errnoText());
  }
  return std::move(contents).str();
}

// Splits a file into its checked header and payload.
std::pair<SnapshotHeader, std::string_view> openEnvelope(const std::string& path,
                                                         std::string_view bytes) {
  if (bytes.substr(0, kMagicLine.size()) != kMagicLine) {
    if (bytes.empty()) {
      fail(path, "empty file");
    }
    if (bytes.substr(0, kZipMagic.size()) == kZipMagic) {
      fail(path,
           "a torch.save() archive, not a train snapshot (use --ignore-snapshot or "
           "another --snapshot-path)");
    }
    fail(path, kMagicLine.starts_with(bytes) ? "truncated inside its first line"
                                             : "not a train snapshot (unknown first line)");
  }
  bytes.remove_prefix(kMagicLine.size());
  const size_t newline = bytes.find('\n');
  if (newline > kMaxHeaderBytes) {  // npos too: no newline at all
    fail(path, "truncated or corrupt header");
  }
  SnapshotHeader header = decodeHeader(path, std::string(bytes.substr(0, newline)));
  bytes.remove_prefix(newline + 1);
  if (bytes.size() != header.payload_bytes) {
    fail(path, (bytes.size() < header.payload_bytes ? "truncated: " : "trailing bytes: ") +
                   std::to_string(bytes.size()) + " payload bytes, header says " +
                   std::to_string(header.payload_bytes));
  }
  if (crc32Of(bytes) != header.payload_crc32) {
    fail(path, "corrupt: payload checksum does not match its header");
  }
  return {header, bytes};
}

// ---- atomic file replacement ----

void writeAll(const std::string& path, int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written <= 0) {
      fail(path, "write failed: " + errnoText());
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
}

void fsyncDirectoryOf(const std::string& path) {
  auto directory = std::filesystem::path(path).parent_path();
  if (directory.empty()) {
    directory = ".";
  }
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);  // best effort: some filesystems refuse fsync on directories
    ::close(fd);
  }
}

void replaceAtomically(const std::string& path, std::string_view head, std::string_view payload,
                       const std::function<void()>& midway) {
  // One temp name per snapshot: only global rank 0 writes, so no two writers
  // share it, and a temp left by a crash is simply overwritten next time.
  checkSnapshotPath(path);  // before the temp file: rename() over a directory fails late
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    fail(path, "cannot create " + temp + ": " + errnoText());
  }
  try {
    writeAll(temp, fd, head);
    writeAll(temp, fd, payload.substr(0, payload.size() / 2));
    if (midway) {
      midway();
    }
    writeAll(temp, fd, payload.substr(payload.size() / 2));
    if (::fsync(fd) != 0) {
      fail(temp, "fsync failed: " + errnoText());
    }
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    fail(path, "cannot rename " + temp + " over it: " + errnoText());
  }
  fsyncDirectoryOf(path);
}

}  // namespace

void checkSnapshotPath(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    fail(path, "is a directory, not a snapshot file");
  }
}

std::string headerJson(const SnapshotHeader& header) {
  nlohmann::ordered_json json = {
      {"format", kFormatName},
      {"task", header.task},
      {"epochs_run", header.epochs_run},
      {"world_size", header.world_size},
      {"payload_bytes", header.payload_bytes},
      {"payload_crc32", header.payload_crc32},
  };
  return json.dump();
}

void writeSnapshot(const std::string& path, SnapshotHeader header, TrainingState state,
                   const std::function<void()>& midway) {
  const std::string payload = serializePayload(state);
  header.payload_bytes = payload.size();
  header.payload_crc32 = crc32Of(payload);
  const std::string head = std::string(kMagicLine) + encodeHeader(header);
  replaceAtomically(path, head, payload, midway);
}

std::optional<SnapshotHeader> readSnapshot(const std::string& path,
                                           const std::string& expected_task, TrainingState state) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return std::nullopt;
  }
  const std::string bytes = readWholeFile(path);
  auto [header, payload] = openEnvelope(path, bytes);
  if (header.task != expected_task) {
    fail(path, "was written by task '" + header.task + "', this run is task '" + expected_task +
                   "' (use --ignore-snapshot or another --snapshot-path)");
  }
  deserializePayload(path, payload, state);
  return header;
}

SnapshotHeader inspectSnapshot(const std::string& path) {
  const std::string bytes = readWholeFile(path);
  return openEnvelope(path, bytes).first;
}

}  // namespace ddprun::worker
