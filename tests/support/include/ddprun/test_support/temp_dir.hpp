// TempDir owns a fresh directory made with mkdtemp under $TMPDIR (or /tmp)
// and removes it, recursively, when destroyed, unless kept. The one scratch
// directory of the tests and the benchmarks. Used by one thread.
#pragma once

#include <filesystem>
#include <string_view>

namespace ddprun::test_support {

class TempDir {
 public:
  // `prefix` shows up in the directory name, to tell leftovers apart.
  explicit TempDir(std::string_view prefix = "ddprun-test");
  ~TempDir();

  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

  // Leaves the directory in place when destroyed (a failed run's logs, for
  // whoever reads the report); returns its path.
  const std::filesystem::path& keep();

 private:
  std::filesystem::path path_;
  bool keep_ = false;
};

}  // namespace ddprun::test_support
