// Malformed and hostile input: Bad with a reason, decided as early as the bytes
// allow, never a NeedMore that would make the caller buffer a claimed size.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "codec_test_support.hpp"

namespace ddprun::proto::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();

// An error is one sentence fragment: it gets embedded in log lines.
void expectFragment(const std::string& error) {
  EXPECT_FALSE(error.empty());
  EXPECT_THAT(error, Not(HasSubstr("\n")));
  EXPECT_NE(error.back(), '.') << error;
}

DecodeResult decodeOnce(RequestDecoder& decoder, std::string_view bytes, Request* out = nullptr) {
  Request scratch;
  return decoder.decode(bytes, out != nullptr ? *out : scratch);
}

struct UnknownByte {
  Dialect dialect;
  std::uint8_t byte;
};

TEST(CodecBadInput, UnknownCommandByteIsBadAndNamesTheByte) {
  const UnknownByte cases[] = {
      {Dialect::Legacy113, 0x09}, {Dialect::Legacy113, 0x0c}, {Dialect::Legacy113, 0xff},
      {Dialect::Legacy21, 0x0c},  {Dialect::Legacy21, 0x0d},  {Dialect::Modern, 0x12},
      {Dialect::Modern, 0x2a},    {Dialect::Modern, 0xff},
  };
  for (const UnknownByte& c : cases) {
    RequestDecoder decoder = decoderAfterPreamble(c.dialect);
    const std::string bytes(1, static_cast<char>(c.byte));
    const DecodeResult result = decodeOnce(decoder, bytes);
    SCOPED_TRACE(std::string(dialectName(c.dialect)) + " byte " + std::to_string(c.byte));
    ASSERT_EQ(result.status, DecodeStatus::Bad);
    EXPECT_EQ(result.size, 0u);
    EXPECT_THAT(result.error, HasSubstr("unknown command byte 0x" + toHex(bytes)));
    EXPECT_THAT(result.error, HasSubstr(std::string(dialectName(c.dialect))));
    expectFragment(result.error);
  }
}

class CodecHostile : public ::testing::TestWithParam<HostileCase> {};

// Bad as soon as the size field is complete, and the error names the claim.
TEST_P(CodecHostile, IsBadNotNeedMore) {
  const HostileCase& hostile = GetParam();
  RequestDecoder decoder = decoderAfterPreamble(hostile.dialect);
  Request request;
  const DecodeResult result = decodeOnce(decoder, hostile.bytes, &request);
  ASSERT_EQ(result.status, DecodeStatus::Bad) << "size " << result.size;
  EXPECT_EQ(result.size, 0u);
  EXPECT_THAT(result.error, HasSubstr(hostile.claimed));
  expectFragment(result.error);
  EXPECT_LE(request.keys.capacity(), 1u) << "room reserved for a claimed count";
  EXPECT_LE(request.values.capacity(), 1u) << "room reserved for a claimed count";
}

// Until the size field is complete, NeedMore within the limit is right.
TEST_P(CodecHostile, PrefixBeforeTheClaimNeedsMore) {
  const HostileCase& hostile = GetParam();
  RequestDecoder decoder = decoderAfterPreamble(hostile.dialect);
  const std::string_view prefix =
      std::string_view(hostile.bytes).substr(0, hostile.bytes.size() - 1);
  const DecodeResult result = decodeOnce(decoder, prefix);
  ASSERT_EQ(result.status, DecodeStatus::NeedMore) << result.error;
  EXPECT_GT(result.size, prefix.size());
  EXPECT_LE(result.size, decoder.limits().max_request_bytes);
}

INSTANTIATE_TEST_SUITE_P(DefaultLimits, CodecHostile, ::testing::ValuesIn(hostileCases()),
                         [](const auto& test) { return test.param.name; });

TEST(CodecBadInput, KeyOverLimitNamesKeyAndLimit) {
  RequestDecoder decoder;
  const DecodeResult result = decodeOnce(decoder, fromHex("02 0120000000000000"));  // 8193
  ASSERT_EQ(result.status, DecodeStatus::Bad);
  EXPECT_THAT(result.error, HasSubstr("key"));
  EXPECT_THAT(result.error, HasSubstr("8193"));
  EXPECT_THAT(result.error, HasSubstr("8192"));
}

TEST(CodecBadInput, KeyAtLimitNeedsTheWholeKey) {
  RequestDecoder decoder;
  const DecodeResult result = decodeOnce(decoder, fromHex("02 0020000000000000"));  // 8192
  ASSERT_EQ(result.status, DecodeStatus::NeedMore) << result.error;
  EXPECT_GE(result.size, 1u + 8 + 8192) << "the hint should cover the announced key";
  EXPECT_LE(result.size, 1u + 8 + 8192);
}

TEST(CodecBadInput, ValueOverLimitNamesValueAndLimit) {
  RequestDecoder decoder;
  const DecodeResult result =
      decodeOnce(decoder, fromHex("00 0300000000000000 2f6b31 0100800000000000"));  // 8 MiB + 1
  ASSERT_EQ(result.status, DecodeStatus::Bad);
  EXPECT_THAT(result.error, HasSubstr("value"));
  EXPECT_THAT(result.error, HasSubstr("8388609"));
  EXPECT_THAT(result.error, HasSubstr("8388608"));
}

TEST(CodecBadInput, KeyCountOverLimitNamesCountAndLimit) {
  RequestDecoder decoder;
  const DecodeResult result = decodeOnce(decoder, fromHex("05 0100020000000000"));  // 131073
  ASSERT_EQ(result.status, DecodeStatus::Bad);
  EXPECT_THAT(result.error, HasSubstr("keys"));
  EXPECT_THAT(result.error, HasSubstr("131073"));
  EXPECT_THAT(result.error, HasSubstr("131072"));
}

// At the limit the count is legal; nothing is reserved until the keys are here.
TEST(CodecBadInput, KeyCountAtLimitReservesNothingWhileShort) {
  RequestDecoder decoder;
  Request request;
  const DecodeResult result = decodeOnce(decoder, fromHex("05 0000020000000000"), &request);
  ASSERT_EQ(result.status, DecodeStatus::NeedMore) << result.error;
  EXPECT_GE(result.size, 1u + 8 + 131072u * 8);
  EXPECT_LE(result.size, decoder.limits().max_request_bytes);
  EXPECT_EQ(request.keys.capacity(), 0u);
}

// Each MULTI_SET pair is at least two u64 lengths, so the hint for a bare
// count covers 16 bytes per pair.
TEST(CodecBadInput, PairCountHintCountsBothLengthsOfEveryPair) {
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern);
  Request request;
  const DecodeResult result = decodeOnce(decoder, fromHex("0b 0010000000000000"), &request);
  ASSERT_EQ(result.status, DecodeStatus::NeedMore) << result.error;
  EXPECT_GE(result.size, 1u + 8 + 4096u * 16);
  EXPECT_EQ(request.values.capacity(), 0u);
}

TEST(CodecBadInput, SecondValidateIsBad) {
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern);
  const DecodeResult result = decodeOnce(decoder, fromHex(kValidateHex));
  ASSERT_EQ(result.status, DecodeStatus::Bad);
  EXPECT_THAT(result.error, HasSubstr("VALIDATE"));
  EXPECT_THAT(result.error, HasSubstr("first"));
  expectFragment(result.error);
}

// A VALIDATE with a wrong magic is not a 2.2+ hello at all
// (docs/tcpstore-protocol.md §4.6); it reads as a 1.13 SET whose key length
// is absurd, and is rejected for that.
TEST(CodecBadInput, WrongValidateMagicIsRejectedAsAnAbsurdLegacySet) {
  RequestDecoder decoder;
  const DecodeResult result = decodeOnce(decoder, fromHex("00 efbeadde 0d6b4f00 00"));
  EXPECT_EQ(decoder.dialect(), Dialect::Legacy113);
  ASSERT_EQ(result.status, DecodeStatus::Bad);
  EXPECT_THAT(result.error, HasSubstr("key"));
}

// MULTI_SET: 1 + 8 + 3 pairs of (8 + 3 + 8 + 20) = 126 bytes against a 100-byte
// limit; Bad once the third pair's sizes show it cannot fit.
TEST(CodecBadInput, MultiSetOverRequestLimitIsBad) {
  Limits limits;
  limits.max_request_bytes = 100;
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern, limits);
  std::string bytes = fromHex("0b 0300000000000000");
  for (const char* key : {"/k1", "/k2", "/k3"}) {
    bytes += fromHex("0300000000000000") + key + fromHex("1400000000000000") + std::string(20, 'v');
  }
  ASSERT_EQ(bytes.size(), 126u);
  const DecodeResult result = decodeOnce(decoder, bytes);
  ASSERT_EQ(result.status, DecodeStatus::Bad);
  EXPECT_THAT(result.error, HasSubstr("request"));
  EXPECT_THAT(result.error, HasSubstr("100"));
  expectFragment(result.error);
  // The same verdict while the bytes are still arriving: never a hint over 100.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    RequestDecoder partial = decoderAfterPreamble(Dialect::Modern, limits);
    const DecodeResult r = decodeOnce(partial, std::string_view(bytes).substr(0, n));
    if (r.status == DecodeStatus::NeedMore) {
      EXPECT_LE(r.size, limits.max_request_bytes) << n << " bytes buffered";
    }
  }
}

// SET "/k" with a value of `value_bytes`: 1 + 8 + 2 + 8 + value_bytes bytes.
std::string setOfSize(std::size_t total) {
  const std::size_t value_bytes = total - 19;
  std::string out;
  WireWriter writer(out);
  writer.u8(0x01);
  writer.bytes("/k");
  writer.bytes(std::string(value_bytes, 'v'));
  return out;
}

// max_request_bytes bounds the whole request, command byte included.
TEST(CodecBadInput, RequestOfExactlyTheLimitIsComplete) {
  Limits limits;
  limits.max_request_bytes = 64;
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern, limits);
  const DecodeResult result = decodeOnce(decoder, setOfSize(64));
  ASSERT_EQ(result.status, DecodeStatus::Complete) << result.error;
  EXPECT_EQ(result.size, 64u);
}

TEST(CodecBadInput, RequestOneByteOverTheLimitIsBad) {
  Limits limits;
  limits.max_request_bytes = 64;
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern, limits);
  const DecodeResult result = decodeOnce(decoder, setOfSize(65));
  EXPECT_EQ(result.status, DecodeStatus::Bad) << "a 65-byte request passed a 64-byte limit";
}

TEST(CodecBadInput, HintForARequestOneByteOverTheLimitIsNotOverTheLimit) {
  Limits limits;
  limits.max_request_bytes = 64;
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern, limits);
  const std::string bytes = setOfSize(65);
  const DecodeResult result = decodeOnce(decoder, std::string_view(bytes).substr(0, 19));
  if (result.status == DecodeStatus::NeedMore) {
    EXPECT_LE(result.size, limits.max_request_bytes);
  } else {
    EXPECT_EQ(result.status, DecodeStatus::Bad);
  }
}

// With every limit switched off, sizes near 2^64 must not wrap around into
// small numbers: the request is not Complete, and decode does not throw.
TEST(CodecBadInput, UnboundedLimitsDoNotWrapAroundOnHugeKeyLengths) {
  Limits limits{kUnlimited, kUnlimited, kUnlimited, kUnlimited};
  RequestDecoder decoder(limits);
  const std::string bytes = fromHex("02 ffffffffffffffff") + std::string(16, 'x');
  DecodeResult result;
  ASSERT_NO_THROW(result = decodeOnce(decoder, bytes));
  EXPECT_NE(result.status, DecodeStatus::Complete) << "consumed " << result.size;
  if (result.status == DecodeStatus::NeedMore) {
    EXPECT_GT(result.size, bytes.size());
  }
}

TEST(CodecBadInput, UnboundedLimitsDoNotWrapAroundOnHugeKeyCounts) {
  Limits limits{kUnlimited, kUnlimited, kUnlimited, kUnlimited};
  RequestDecoder decoder(limits);
  // 2^61 keys of at least 8 bytes each: 2^64 bytes, which wraps to 0.
  const std::string bytes = fromHex("05 0000000000000020") + std::string(16, 'x');
  DecodeResult result;
  ASSERT_NO_THROW(result = decodeOnce(decoder, bytes));
  EXPECT_NE(result.status, DecodeStatus::Complete) << "consumed " << result.size;
}

}  // namespace
}  // namespace ddprun::proto::testing
