// Questions tests ask of logs and outputs: does a text contain a part, and
// how many times.
#pragma once

#include <string>

namespace ddprun::test_support {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline int countOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace ddprun::test_support
