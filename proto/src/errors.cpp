#include "ddprun/proto/errors.hpp"

#include <cstdio>
#include <cstdlib>

namespace ddprun {

void assertionFailed(const char* condition, const char* file, int line,
                     const std::string& message) {
  std::fprintf(stderr, "ddprun: internal error at %s:%d: %s (%s)\n", file, line, message.c_str(),
               condition);
  std::abort();
}

}  // namespace ddprun
