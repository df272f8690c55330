// Per-connection dialect detection (docs/tcpstore-protocol.md §4.6):
// 00 CE F7 85 3C is a 2.2+ client, anything else the configured legacy
// dialect, decided once per connection.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "codec_test_support.hpp"

namespace ddprun::proto::testing {
namespace {

using ::testing::HasSubstr;

// The 2.6 client's first segment (torch26-client-all-ops.jsonl, line 2).
constexpr std::string_view kModernHello = "00 cef7853c 0d 6b4f0000";
// A 1.13 SET "/k1" = "v1" (docs/tcpstore-protocol.md §7.1); it starts with 00 too.
constexpr std::string_view kLegacySet = "00 0300000000000000 2f6b31 0200000000000000 7631";

TEST(CodecDialect, ValidateMagicMeansModern) {
  RequestDecoder decoder;
  Request request;
  const DecodeResult result = decoder.decode(fromHex(kModernHello), request);
  ASSERT_EQ(result.status, DecodeStatus::Complete) << result.error;
  EXPECT_EQ(result.size, 5u);
  EXPECT_EQ(request.command, Command::Validate);
  EXPECT_EQ(decoder.dialect(), Dialect::Modern);
}

TEST(CodecDialect, ModernIsDetectedWhateverLegacyDialectIsConfigured) {
  RequestDecoder decoder(Limits{}, Dialect::Legacy21);
  const StreamDecode decoded = decodeStream(decoder, fromHex(kModernHello));
  ASSERT_EQ(decoded.requests.size(), 2u);
  EXPECT_EQ(decoder.dialect(), Dialect::Modern);
  EXPECT_EQ(decoded.requests[1].command, Command::Ping);
  EXPECT_EQ(decoded.requests[1].word, 0x4f6bu);
}

TEST(CodecDialect, LegacySetStartingWithZeroIsLegacy113) {
  RequestDecoder decoder;
  Request request;
  const DecodeResult result = decoder.decode(fromHex(kLegacySet), request);
  ASSERT_EQ(result.status, DecodeStatus::Complete) << result.error;
  EXPECT_EQ(decoder.dialect(), Dialect::Legacy113);
  EXPECT_EQ(request.command, Command::Set);
}

// A leading zero alone cannot decide: it may be VALIDATE or a 1.13 SET.
TEST(CodecDialect, LeadingZeroWaitsForFiveBytes) {
  const std::string hello = fromHex(kModernHello);
  for (std::size_t n = 0; n < 5; ++n) {
    RequestDecoder decoder;
    Request request;
    const DecodeResult result = decoder.decode(std::string_view(hello).substr(0, n), request);
    EXPECT_EQ(result.status, DecodeStatus::NeedMore) << n << " bytes";
    EXPECT_GT(result.size, n);
    EXPECT_LE(result.size, 5u);
    EXPECT_EQ(decoder.dialect(), Dialect::Undecided) << n << " bytes";
  }
}

TEST(CodecDialect, NonZeroFirstByteDecidesLegacyAtOnce) {
  RequestDecoder decoder;
  Request request;
  const DecodeResult result = decoder.decode(fromHex("03"), request);  // ADD "init/" begins
  EXPECT_EQ(result.status, DecodeStatus::NeedMore);
  EXPECT_EQ(decoder.dialect(), Dialect::Legacy113);
}

TEST(CodecDialect, ConfiguredLegacy21IsUsedForNonZeroFirstByte) {
  RequestDecoder decoder(Limits{}, Dialect::Legacy21);
  Request request;
  decoder.decode(fromHex("03"), request);
  EXPECT_EQ(decoder.dialect(), Dialect::Legacy21);
}

TEST(CodecDialect, NearMissMagicIsALegacySetWithAnAbsurdKey) {
  RequestDecoder decoder;
  Request request;
  // Last magic byte 3d: a 1.13 SET whose key length is 0x3d85f7ce (~1 GB).
  const DecodeResult result = decoder.decode(fromHex("00 cef7853d 00000000 0d6b4f"), request);
  EXPECT_EQ(decoder.dialect(), Dialect::Legacy113);
  ASSERT_EQ(result.status, DecodeStatus::Bad);
  EXPECT_THAT(result.error, HasSubstr("key"));
  EXPECT_THAT(result.error, HasSubstr(std::to_string(0x3d85f7ceULL)));
}

// Byte 7 is WATCH_KEY in 1.13 and DELETE_KEY in 2.1 (docs/tcpstore-protocol.md
// §5.1); nothing in the bytes tells them apart, so the configuration does.
TEST(CodecDialect, Byte7DependsOnTheConfiguredLegacyDialect) {
  const std::string bytes = fromHex("07 0300000000000000 2f6b31");
  Request request;
  RequestDecoder legacy113;
  ASSERT_EQ(legacy113.decode(bytes, request).status, DecodeStatus::Complete);
  EXPECT_EQ(request.command, Command::WatchKey);
  RequestDecoder legacy21(Limits{}, Dialect::Legacy21);
  ASSERT_EQ(legacy21.decode(bytes, request).status, DecodeStatus::Complete);
  EXPECT_EQ(request.command, Command::DeleteKey);
}

TEST(CodecDialect, Byte8IsDeleteIn113AndAppendIn21) {
  Request request;
  RequestDecoder legacy113;
  ASSERT_EQ(legacy113.decode(fromHex("08 0300000000000000 2f6b31"), request).status,
            DecodeStatus::Complete);
  EXPECT_EQ(request.command, Command::DeleteKey);
  RequestDecoder legacy21(Limits{}, Dialect::Legacy21);
  const std::string append = fromHex("08 0300000000000000 2f6170 0100000000000000 78");
  ASSERT_EQ(legacy21.decode(append, request).status, DecodeStatus::Complete);
  EXPECT_EQ(request.command, Command::Append);
  EXPECT_EQ(request.values.at(0), "x");
}

TEST(CodecDialect, Byte9IsUnknownIn113AndMultiGetIn21) {
  const std::string bytes = fromHex("09 0100000000000000 0300000000000000 2f6b31");
  Request request;
  RequestDecoder legacy113;
  const DecodeResult bad = legacy113.decode(bytes, request);
  EXPECT_EQ(bad.status, DecodeStatus::Bad);
  EXPECT_THAT(bad.error, HasSubstr("0x09"));
  RequestDecoder legacy21(Limits{}, Dialect::Legacy21);
  ASSERT_EQ(legacy21.decode(bytes, request).status, DecodeStatus::Complete);
  EXPECT_EQ(request.command, Command::MultiGet);
}

// The dialect is decided once: a later VALIDATE-looking request on a legacy
// connection is a 1.13 SET with an absurd key length.
TEST(CodecDialect, LegacyConnectionNeverSwitchesToModern) {
  RequestDecoder decoder;
  const std::string stream = fromHex(kLegacySet) + fromHex(kModernHello);
  const StreamDecode decoded = decodeStream(decoder, stream);
  EXPECT_EQ(decoded.requests.size(), 1u);
  EXPECT_EQ(decoder.dialect(), Dialect::Legacy113);
  EXPECT_EQ(decoded.last.status, DecodeStatus::Bad);
}

TEST(CodecDialect, OnlyLegacyDialectsCanBeConfigured) {
  EXPECT_THROW(RequestDecoder(Limits{}, Dialect::Modern), std::invalid_argument);
  EXPECT_THROW(RequestDecoder(Limits{}, Dialect::Undecided), std::invalid_argument);
  EXPECT_NO_THROW(RequestDecoder(Limits{}, Dialect::Legacy21));
}

// Detection alone may ask for 5 bytes; a request limit below that could never
// be honoured by the hints, so such limits are refused up front.
TEST(CodecDialect, TinyRequestLimitIsRefused) {
  Limits limits;
  limits.max_request_bytes = 4;
  EXPECT_THROW(RequestDecoder{limits}, std::invalid_argument);
  limits.max_request_bytes = 16;
  EXPECT_NO_THROW(RequestDecoder{limits});
}

}  // namespace
}  // namespace ddprun::proto::testing
