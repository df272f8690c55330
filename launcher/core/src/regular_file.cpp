#include "ddprun/launcher/core/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "ddprun/launcher/core/owned_fd.hpp"

namespace ddprun::launcher {
namespace {

// open() and read() rather than an ifstream, which would block on a FIFO in
// its open and read /dev/zero for ever: O_NONBLOCK makes opening a FIFO
// return at once, fstat() then refuses it and any device, and the reads
// stop one byte past `cap` (to tell a file of exactly `cap` bytes from a
// longer one).
bool readUpTo(int fd, std::size_t cap, RegularFileRead& read) {
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    read.why = "not a regular file";
    return false;
  }
  read.text.reserve(std::min(static_cast<std::size_t>(std::max<off_t>(status.st_size, 0)), cap) +
                    1);
  std::array<char, 1 << 16> chunk{};
  while (read.text.size() <= cap) {
    const std::size_t wanted = std::min(chunk.size(), cap + 1 - read.text.size());
    const ssize_t n = ::read(fd, chunk.data(), wanted);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      read.why = std::strerror(errno);
      return false;
    }
    if (n == 0) {
      break;
    }
    read.text.append(chunk.data(), static_cast<std::size_t>(n));
  }
  if (read.text.size() > cap) {
    read.over_cap = true;
    read.text.resize(cap);
  }
  return true;
}

}  // namespace

RegularFileRead readRegularFile(const std::filesystem::path& file, std::size_t cap, Links links) {
  RegularFileRead read;
  const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (links == Links::kRefuse ? O_NOFOLLOW : 0);
  const int fd = ::open(file.c_str(), flags);
  if (fd < 0) {
    if (errno == ELOOP && links == Links::kRefuse) {
      read.found = true;
      read.why = "a symbolic link";
    } else if (errno != ENOENT) {
      read.found = true;
      read.why = std::strerror(errno);
    }
    return read;
  }
  const OwnedFd closer(fd);
  read.found = true;
  if (!readUpTo(fd, cap, read)) {
    read.text.clear();
  }
  return read;
}

}  // namespace ddprun::launcher
