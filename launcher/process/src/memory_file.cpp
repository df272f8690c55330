#include "ddprun/launcher/process/memory_file.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace ddprun::launcher {

MemoryFile::MemoryFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
  if (fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "memfd_create");
  }
}

MemoryFile::~MemoryFile() { ::close(fd_); }

std::string MemoryFile::text() const {
  std::string text;
  char buffer[4096];
  for (off_t offset = 0;;) {
    const ssize_t got = ::pread(fd_, buffer, sizeof(buffer), offset);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return text;
    }
    text.append(buffer, static_cast<std::size_t>(got));
    offset += got;
  }
}

}  // namespace ddprun::launcher
