#include "ddprun/proto/visible_text.hpp"

#include <cstdint>
#include <cstdio>

namespace ddprun::proto {
namespace {

// A well-formed UTF-8 sequence at the front of `text`: its code point and
// length. Table 3-7 of the Unicode standard: the second byte's range depends
// on the first (no overlong forms, no surrogates, nothing past U+10FFFF).
struct Decoded {
  std::uint32_t code_point = 0;
  std::size_t length = 0;  // 0: not well-formed
};

Decoded decodeMultiByte(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    low = lead == 0xe0 ? 0xa0 : 0x80;
    high = lead == 0xed ? 0x9f : 0xbf;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    low = lead == 0xf0 ? 0x90 : 0x80;
    high = lead == 0xf4 ? 0x8f : 0xbf;
  } else {
    return {};
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) {
    return {};
  }
  std::uint32_t code_point = lead & (0xffu >> (length + 1));
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) {
      return {};
    }
    code_point = (code_point << 6) | (byte(i) & 0x3fu);
  }
  return {code_point, length};
}

bool isHiddenCodePoint(std::uint32_t c) {
  return (c >= 0x80 && c <= 0x9f) ||                   // C1 controls
         c == 0x061c || c == 0x200e || c == 0x200f ||  // bidi marks
         (c >= 0x202a && c <= 0x202e) ||               // embeddings, overrides
         (c >= 0x2066 && c <= 0x2069) ||               // isolates
         c == 0x2028 || c == 0x2029;                   // line, paragraph separators
}

void appendHex(std::string& out, const char* format, unsigned value) {
  char escape[8];
  std::snprintf(escape, sizeof escape, format, value);
  out += escape;
}

}  // namespace

std::string visible(std::string_view text) {
  std::string shown;
  shown.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    // A control byte and a byte that is not well-formed UTF-8 are both shown
    // as \xNN, in two branches: only a byte past ASCII is decoded.
    if (byte == '\\') {
      shown += "\\\\";
      ++i;
    } else if (byte < 0x20 || byte == 0x7f) {  // NOLINT(bugprone-branch-clone): see above
      appendHex(shown, "\\x%02x", byte);
      ++i;
    } else if (byte < 0x80) {
      shown += static_cast<char>(byte);
      ++i;
    } else if (const Decoded decoded = decodeMultiByte(text.substr(i)); decoded.length == 0) {
      appendHex(shown, "\\x%02x", byte);
      ++i;
    } else {
      if (isHiddenCodePoint(decoded.code_point)) {
        appendHex(shown, "\\u%04x", decoded.code_point);
      } else {
        shown.append(text.substr(i, decoded.length));
      }
      i += decoded.length;
    }
  }
  return shown;
}

}  // namespace ddprun::proto
