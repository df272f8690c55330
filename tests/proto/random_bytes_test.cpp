// proto::fillRandom: every byte asked for comes from the kernel, whatever the
// size (getrandom(2) may return fewer than asked past 256 bytes).
#include "ddprun/proto/random_bytes.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace ddprun::proto {
namespace {

TEST(RandomBytesTest, FillsEveryByteOfALargeBuffer) {
  // 1 MiB: the chance that a given 4 KiB stretch is still all zero after a
  // real fill is 2^-32768.
  std::vector<unsigned char> bytes(1 << 20, 0);
  fillRandom(bytes);
  for (std::size_t page = 0; page < bytes.size(); page += 4096) {
    const auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(page);
    EXPECT_TRUE(std::any_of(begin, begin + 4096, [](unsigned char b) { return b != 0; }))
        << "the 4 KiB at " << page << " were left zero";
  }
}

TEST(RandomBytesTest, EachDrawIsNew) {
  std::set<std::vector<unsigned char>> seen;
  for (int i = 0; i < 100; ++i) {
    std::vector<unsigned char> id(16);
    fillRandom(id);
    EXPECT_TRUE(seen.insert(id).second) << "draw " << i << " repeated an earlier one";
  }
}

TEST(RandomBytesTest, AnEmptyBufferAsksNothing) {
  std::vector<unsigned char> none;
  EXPECT_NO_THROW(fillRandom(none));
}

}  // namespace
}  // namespace ddprun::proto
