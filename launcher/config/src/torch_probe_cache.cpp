#include "ddprun/launcher/config/torch_probe_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "ddprun/launcher/core/environment.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The variables CPython reads to build sys.path (HOME for the user site).
constexpr std::array<const char*, 8> kPathVariables = {
    "PYTHONPATH",       "PYTHONHOME",     "PYTHONUSERBASE",   "PYTHONNOUSERSITE",
    "PYTHONPLATLIBDIR", "PYTHONSAFEPATH", "PYTHONEXECUTABLE", "HOME"};

// A file's identity and version; "absent" when there is none. Directories
// count: a package or .pth file added or removed changes their mtime.
std::string stampOf(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    return "absent";
  }
  return std::to_string(status.st_dev) + ":" + std::to_string(status.st_ino) + ":" +
         std::to_string(status.st_mtim.tv_sec) + "." + std::to_string(status.st_mtim.tv_nsec) +
         ":" + std::to_string(status.st_size);
}

// A file changed less than this long ago may change again within the same
// tick of the file system's clock without its mtime moving: an answer read
// from it is not kept (git's "racily clean" entries, the same way round).
constexpr std::chrono::seconds kSettled{2};

bool changedRecently(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    return false;
  }
  const auto changed = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(status.st_mtim.tv_sec) +
          std::chrono::nanoseconds(status.st_mtim.tv_nsec)));
  return changed > std::chrono::system_clock::now() - kSettled;
}

std::string keyOf(const std::string& python, const ProbeEnv& env) {
  std::string key = thisHostName() + "\n" + python;
  for (const char* variable : kPathVariables) {
    key += "\n";
    key += variable;
    for (const auto& [name, value] : env) {
      if (name == variable) {
        key += "=" + value;
      }
    }
  }
  return key;
}

bool startupFile(const fs::path& file) {
  const std::string name = file.filename().string();
  return file.extension() == ".pth" || name == "sitecustomize.py" || name == "usercustomize.py";
}

// Every file whose change could change the answer (see the header).
std::vector<std::string> watchedFiles(const std::string& python, const TorchProbeAnswer& answer) {
  const fs::path bin = fs::path(python).parent_path();
  std::vector<std::string> files = {python, (bin / "pyvenv.cfg").string(),
                                    (bin.parent_path() / "pyvenv.cfg").string(),
                                    answer.torch_origin};
  for (const std::string& entry : answer.sys_path) {
    files.push_back(entry);
    std::error_code error;
    for (fs::directory_iterator it(entry, error), end; !error && it != end; it.increment(error)) {
      if (startupFile(it->path())) {
        files.push_back(it->path().string());
      }
    }
  }
  return files;
}

json readCache(const fs::path& file) {
  std::ifstream in(file);
  if (!in) {
    return json::object();
  }
  json cache = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return cache.is_object() ? cache : json::object();
}

// At most this many answers are kept (interpreters × environments); the
// oldest go first.
constexpr std::size_t kMaxAnswers = 32;

void dropOldest(json& cache) {
  while (cache.size() > kMaxAnswers) {
    auto oldest = cache.begin();
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it.value().value("kept_at", 0LL) < oldest.value().value("kept_at", 0LL)) {
        oldest = it;
      }
    }
    cache.erase(oldest);
  }
}

void writeWhole(const fs::path& file, const json& cache) {
  std::error_code error;
  fs::create_directories(file.parent_path(), error);
  const fs::path temporary = file.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << cache.dump();
    if (!out.flush()) {
      fs::remove(temporary, error);
      return;
    }
  }
  fs::rename(temporary, file, error);
  if (error) {
    fs::remove(temporary, error);
  }
}

}  // namespace

bool isCacheableInterpreter(const std::string& python) {
  std::ifstream in(python, std::ios::binary);
  std::array<char, 4> magic{};
  return in.read(magic.data(), magic.size()) && magic == std::array<char, 4>{0x7f, 'E', 'L', 'F'};
}

std::optional<std::string> TorchProbeCache::keptTorchOrigin(const std::string& python,
                                                            const ProbeEnv& env) const {
  const json cache = readCache(file_);
  const auto entry = cache.find(keyOf(python, env));
  if (entry == cache.end() || !entry->is_object() || !entry->contains("stamps") ||
      !(*entry)["stamps"].is_object() || (*entry)["stamps"].empty() ||
      !entry->contains("torch_origin") || !(*entry)["torch_origin"].is_string()) {
    return std::nullopt;
  }
  for (const auto& [path, stamp] : (*entry)["stamps"].items()) {
    if (!stamp.is_string() || stampOf(path) != stamp.get<std::string>()) {
      return std::nullopt;
    }
  }
  return (*entry)["torch_origin"].get<std::string>();
}

void TorchProbeCache::remember(const std::string& python, const ProbeEnv& env,
                               const TorchProbeAnswer& answer) const {
  if (!answer.found || answer.torch_origin.empty() || !isCacheableInterpreter(python)) {
    return;
  }
  json stamps = json::object();
  for (const std::string& file : watchedFiles(python, answer)) {
    if (changedRecently(file)) {
      return;
    }
    stamps[file] = stampOf(file);
  }
  json cache = readCache(file_);
  cache[keyOf(python, env)] = {
      {"torch_origin", answer.torch_origin},
      {"stamps", stamps},
      {"kept_at", static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count())}};
  dropOldest(cache);
  writeWhole(file_, cache);
}

std::optional<fs::path> defaultProbeCacheFile(const Environment& env) {
  if (env("DDPRUN_PYTHON_PROBE_CACHE").value_or("") == "0") {
    return std::nullopt;
  }
  if (const auto xdg = env("XDG_CACHE_HOME"); xdg && !xdg->empty()) {
    return fs::path(*xdg) / "ddprun" / "python-probes.json";
  }
  if (const auto home = env("HOME"); home && !home->empty()) {
    return fs::path(*home) / ".cache" / "ddprun" / "python-probes.json";
  }
  return std::nullopt;
}

}  // namespace ddprun::launcher
