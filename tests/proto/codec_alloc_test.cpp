// "Nothing is allocated for a claimed size": the global operator new of this
// test program records the largest single allocation made while decoding, and
// hostile inputs must not get one beyond what their actual bytes justify.
// A separate program, because replacing operator new affects the whole binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "codec_test_support.hpp"

namespace {

// Single-threaded test program: plain globals are enough.
bool g_tracking = false;
std::size_t g_largest = 0;

void* allocate(std::size_t size) {
  if (g_tracking) {
    g_largest = std::max(g_largest, size);
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) {
    return p;
  }
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace ddprun::proto::testing {
namespace {

// Room for a few small strings (the error text) and for views of the keys
// that really are in the input; never anything proportional to a claim.
std::size_t allowance(std::size_t input_bytes) { return 1024 + 2 * input_bytes; }

std::size_t largestAllocationWhileDecoding(RequestDecoder& decoder, std::string_view bytes) {
  Request request;
  g_largest = 0;
  g_tracking = true;
  decoder.decode(bytes, request);
  g_tracking = false;
  return g_largest;
}

class CodecAllocation : public ::testing::TestWithParam<HostileCase> {};

TEST_P(CodecAllocation, HostileClaimAllocatesNothingLarge) {
  const HostileCase& hostile = GetParam();
  RequestDecoder decoder = decoderAfterPreamble(hostile.dialect);
  EXPECT_LE(largestAllocationWhileDecoding(decoder, hostile.bytes),
            allowance(hostile.bytes.size()));
}

INSTANTIATE_TEST_SUITE_P(DefaultLimits, CodecAllocation, ::testing::ValuesIn(hostileCases()),
                         [](const auto& test) { return test.param.name; });

// Legal but unfulfilled claims: the maximal key count and pair count, with
// none of the keys sent yet.
TEST(CodecAllocationLegal, MaximalCountsReserveNothingBeforeTheKeysArrive) {
  for (const char* bytes : {"06 0000020000000000", "0b 0000020000000000", "0a 0000020000000000"}) {
    RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern);
    const std::string input = fromHex(bytes);
    EXPECT_LE(largestAllocationWhileDecoding(decoder, input), allowance(input.size())) << bytes;
  }
}

// The probe itself must be able to see a large allocation, or the tests
// above prove nothing.
TEST(CodecAllocationProbe, SeesAReserve) {
  g_largest = 0;
  g_tracking = true;
  std::vector<std::string_view> views;
  views.reserve(100000);
  g_tracking = false;
  EXPECT_GE(g_largest, 100000 * sizeof(std::string_view));
}

}  // namespace
}  // namespace ddprun::proto::testing
