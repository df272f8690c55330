#include "ddprun/test_support/hex.hpp"

#include <stdexcept>

namespace ddprun::test_support {

namespace {

int nibble(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  throw std::invalid_argument(std::string("not a hex digit: '") + c + "'");
}

}  // namespace

std::string fromHex(std::string_view hex) {
  std::string digits;
  digits.reserve(hex.size());
  for (char c : hex) {
    if (c != ' ') {
      digits.push_back(c);
    }
  }
  if (digits.size() % 2 != 0) {
    throw std::invalid_argument("odd-length hex string");
  }
  std::string out;
  out.reserve(digits.size() / 2);
  for (std::size_t i = 0; i < digits.size(); i += 2) {
    out.push_back(static_cast<char>(nibble(digits[i]) << 4 | nibble(digits[i + 1])));
  }
  return out;
}

std::string toHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 0xF]);
  }
  return out;
}

}  // namespace ddprun::test_support
