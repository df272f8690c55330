// One printf-style number format for every benchmark's table cells.
#pragma once

#include <cstdio>
#include <string>

namespace ddprun::bench {

// `pattern` holds one double conversion, e.g. "%.1f"; the result fits 64 bytes.
inline std::string formatNumber(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), pattern, value);
  return buffer;
}

}  // namespace ddprun::bench
