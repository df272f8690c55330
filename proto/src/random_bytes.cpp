#include "ddprun/proto/random_bytes.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "ddprun/proto/errors.hpp"

namespace ddprun::proto {

void fillRandom(std::span<unsigned char> bytes) {
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    // Up to 256 bytes come whole once the generator is seeded; a larger
    // request may be cut short by a signal, so the rest is asked again.
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw Error(std::string("cannot draw random bytes (getrandom: ") + std::strerror(errno) +
                  ")");
    }
    filled += static_cast<std::size_t>(got);
  }
}

}  // namespace ddprun::proto
