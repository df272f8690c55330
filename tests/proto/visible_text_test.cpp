// proto::visible(), ddprun's one rule for showing text from outside: each
// class of character it escapes, and what it leaves alone.
#include "ddprun/proto/visible_text.hpp"

#include <gtest/gtest.h>

#include <string>

namespace ddprun::proto {
namespace {

using namespace std::string_literals;

TEST(VisibleText, PrintableAsciiAndValidUtf8AreLeftAlone) {
  EXPECT_EQ(visible(""), "");
  EXPECT_EQ(visible("job-7 /var/log/ddprun 'a' \"b\" ~!@#$%^&*()"),
            "job-7 /var/log/ddprun 'a' \"b\" ~!@#$%^&*()");
  const std::string utf8 = "caf\xc3\xa9 \xe2\x82\xac \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80";
  EXPECT_EQ(visible(utf8), utf8);
  EXPECT_EQ(visible("\xc2\xa0\xc2\xa9"), "\xc2\xa0\xc2\xa9") << "U+00A0 and U+00A9, past C1";
  EXPECT_EQ(visible("\xe2\x80\x8d"), "\xe2\x80\x8d") << "U+200D (a joiner) is no bidi mark";
}

TEST(VisibleText, ABackslashIsDoubledSoEscapesReadBackUnambiguously) {
  EXPECT_EQ(visible("a\\b"), "a\\\\b");
  EXPECT_EQ(visible("\\x1b"), "\\\\x1b");
  EXPECT_NE(visible("\\x1b"), visible("\x1b"));
}

TEST(VisibleText, C0ControlsAndDelAreHexEscaped) {
  EXPECT_EQ(visible("\0"s), "\\x00");
  EXPECT_EQ(visible("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(visible("\x07\x08\t\n\v\f\r"), "\\x07\\x08\\x09\\x0a\\x0b\\x0c\\x0d");
  EXPECT_EQ(visible("\x1f\x7f"), "\\x1f\\x7f");
  EXPECT_EQ(visible("\x1b]0;title\x07"), "\\x1b]0;title\\x07");
}

TEST(VisibleText, C1ControlsAreUnicodeEscaped) {
  EXPECT_EQ(visible("\xc2\x80"), "\\u0080");
  EXPECT_EQ(visible("a\xc2\x9b"
                    "31mb"),
            "a\\u009b31mb")
      << "U+009B, CSI";
  EXPECT_EQ(visible("\xc2\x9f"), "\\u009f");
}

TEST(VisibleText, BidiMarksOverridesIsolatesAndLineSeparatorsAreUnicodeEscaped) {
  EXPECT_EQ(visible("\xd8\x9c"), "\\u061c");
  EXPECT_EQ(visible("\xe2\x80\x8e\xe2\x80\x8f"), "\\u200e\\u200f");
  EXPECT_EQ(visible("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae"),
            "\\u202a\\u202b\\u202c\\u202d\\u202e");
  EXPECT_EQ(visible("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9"),
            "\\u2066\\u2067\\u2068\\u2069");
  EXPECT_EQ(visible("\xe2\x80\xa8\xe2\x80\xa9"), "\\u2028\\u2029");
  EXPECT_EQ(visible("run\xe2\x80\xaegpj.exe"), "run\\u202egpj.exe");
}

TEST(VisibleText, EachByteOfInvalidUtf8IsHexEscaped) {
  EXPECT_EQ(visible("r\xff"), "r\\xff");
  EXPECT_EQ(visible("\x80\xbf"), "\\x80\\xbf") << "stray continuation bytes";
  EXPECT_EQ(visible("a\xc3(b"), "a\\xc3(b") << "a cut sequence";
  EXPECT_EQ(visible("\xe2\x82"), "\\xe2\\x82") << "cut at the end";
  EXPECT_EQ(visible("\xc0\xaf"), "\\xc0\\xaf") << "an overlong '/'";
  EXPECT_EQ(visible("\xe0\x80\xaf"), "\\xe0\\x80\\xaf") << "an overlong three-byte form";
  EXPECT_EQ(visible("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a surrogate, U+D800";
  EXPECT_EQ(visible("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80") << "past U+10FFFF";
  EXPECT_EQ(visible("\xf8\x88\x80\x80\x80"), "\\xf8\\x88\\x80\\x80\\x80");
  EXPECT_EQ(visible("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf") << "U+10FFFF itself is valid";
}

// What it returns holds no control byte and is valid UTF-8 whatever it was
// given: every byte value, alone and after each lead byte.
TEST(VisibleText, TheResultHasNoControlByteWhateverItWasGiven) {
  for (int first = 0; first < 256; ++first) {
    for (int second = 0; second < 256; ++second) {
      const std::string text = {static_cast<char>(first), static_cast<char>(second)};
      for (const char c : visible(text)) {
        const auto byte = static_cast<unsigned char>(c);
        ASSERT_FALSE(byte < 0x20 || byte == 0x7f) << first << " " << second;
      }
      // A C1 control encoded (C2 80..9F) never survives either.
      ASSERT_EQ(visible(text).find("\xc2\x85"), std::string::npos) << first << " " << second;
    }
  }
}

}  // namespace
}  // namespace ddprun::proto
