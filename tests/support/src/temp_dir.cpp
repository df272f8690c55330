#include "ddprun/test_support/temp_dir.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

namespace ddprun::test_support {

TempDir::TempDir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = (base != nullptr && *base != '\0') ? base : "/tmp";
  pattern += "/";
  pattern += prefix;
  pattern += "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  if (keep_) {
    return;
  }
  // Never throw from a destructor: a leftover directory is not worth a crash.
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

const std::filesystem::path& TempDir::keep() {
  keep_ = true;
  return path_;
}

}  // namespace ddprun::test_support
