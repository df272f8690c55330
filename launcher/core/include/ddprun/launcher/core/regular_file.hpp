// A file whose contents someone else controls (a worker's events or error
// file, `ddprun timeline`'s inputs), read so that what lies at the path can
// neither block the reader nor make it grow without bound: only a regular
// file is read (a FIFO is opened without waiting for a writer, then
// refused; a device such as /dev/zero is refused), and at most `cap` bytes
// of it. Stateless; any thread.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace ddprun::launcher {

// Whether a symbolic link at the path itself is read through: kRefuse where
// the path is someone else's to fill (a worker's), kFollow where a person
// named it. Either way what is read must be a regular file.
enum class Links { kFollow, kRefuse };

struct RegularFileRead {
  bool found = false;     // false: there is no such file (`why` stays "")
  std::string text;       // its first `cap` bytes at most
  bool over_cap = false;  // it held more than `cap` bytes; `text` is the first `cap`
  // Why it was not read ("not a regular file", "a symbolic link", the
  // system's error); "" when it was read or is absent.
  std::string why;
};

RegularFileRead readRegularFile(const std::filesystem::path& file, std::size_t cap, Links links);

}  // namespace ddprun::launcher
