// Incremental decoding: requests arrive split at any byte (the 1.13 client
// sends the type byte on its own) or several to a segment (docs/tcpstore-protocol.md §3.2).
#include <gtest/gtest.h>

#include "codec_test_support.hpp"

namespace ddprun::proto::testing {
namespace {

class CodecIncremental : public ::testing::TestWithParam<GoldenCase> {};

// Every proper prefix is NeedMore with a hint that is a true lower bound: more
// than is buffered, no more than the request's real size, within the limit.
TEST_P(CodecIncremental, EveryPrefixNeedsMoreWithAValidHint) {
  const GoldenCase& golden = GetParam();
  const std::string_view bytes = golden.bytes;
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    RequestDecoder decoder = golden.request.command == Command::Validate
                                 ? RequestDecoder()
                                 : decoderAfterPreamble(golden.dialect);
    Request request;
    const DecodeResult result = decoder.decode(bytes.substr(0, n), request);
    SCOPED_TRACE(std::to_string(n) + " of " + std::to_string(bytes.size()) + " bytes");
    ASSERT_EQ(result.status, DecodeStatus::NeedMore) << result.error;
    EXPECT_GT(result.size, n);
    EXPECT_LE(result.size, bytes.size());
    EXPECT_LE(result.size, decoder.limits().max_request_bytes);
  }
}

// The same decoder is asked again after each new byte, as a connection would.
TEST_P(CodecIncremental, OneByteAtATimeYieldsTheRequest) {
  const GoldenCase& golden = GetParam();
  RequestDecoder decoder = golden.request.command == Command::Validate
                               ? RequestDecoder()
                               : decoderAfterPreamble(golden.dialect);
  const StreamDecode decoded = decodeByteByByte(decoder, golden.bytes);
  ASSERT_EQ(decoded.requests.size(), 1u) << decoded.last.error;
  EXPECT_EQ(decoded.requests[0], golden.request);
  EXPECT_EQ(decoded.consumed, golden.bytes.size());
}

INSTANTIATE_TEST_SUITE_P(AllDialects, CodecIncremental, ::testing::ValuesIn(goldenCases()),
                         [](const auto& test) { return test.param.name; });

// The 39-byte segment of torch113-client-to-torch26-server.jsonl: SET "/a"="b"
// and the WAIT of the following get("a"), back to back.
TEST(CodecBackToBack, SetAndWaitInOneSegment) {
  const std::string segment = fromHex("00 0200000000000000 2f61 0100000000000000 62") +
                              fromHex("05 0100000000000000 0200000000000000 2f61");
  ASSERT_EQ(segment.size(), 39u);
  RequestDecoder decoder;
  const StreamDecode decoded = decodeStream(decoder, segment);
  ASSERT_EQ(decoded.requests.size(), 2u) << decoded.last.error;
  EXPECT_EQ(decoded.sizes, (std::vector<std::size_t>{20, 19}));
  EXPECT_EQ(decoded.requests[0].command, Command::Set);
  EXPECT_EQ(decoded.requests[0].values, std::vector<std::string>{"b"});
  EXPECT_EQ(decoded.requests[1].command, Command::Wait);
  EXPECT_EQ(decoded.requests[1].keys, std::vector<std::string>{"/a"});
  EXPECT_EQ(decoded.last.status, DecodeStatus::NeedMore);
}

// All golden requests of a dialect concatenated decode one after another, and
// a trailing partial request is reported as NeedMore, not lost.
TEST(CodecBackToBack, AllGoldenRequestsOfEachDialectInOneBuffer) {
  for (Dialect dialect : {Dialect::Legacy113, Dialect::Legacy21, Dialect::Modern}) {
    SCOPED_TRACE(std::string(dialectName(dialect)));
    std::string buffer;
    std::vector<OwnedRequest> expected;
    for (const GoldenCase& golden : goldenCases()) {
      if (golden.dialect == dialect && golden.request.command != Command::Validate) {
        buffer += golden.bytes;
        expected.push_back(golden.request);
      }
    }
    // A WAIT cut inside its key count.
    buffer += static_cast<char>(wireByte(dialect, Command::Wait).value());
    buffer += fromHex("0200");
    RequestDecoder decoder = decoderAfterPreamble(dialect);
    const StreamDecode decoded = decodeStream(decoder, buffer);
    EXPECT_EQ(decoded.requests, expected);
    EXPECT_EQ(decoded.consumed, buffer.size() - 3);
    EXPECT_EQ(decoded.last.status, DecodeStatus::NeedMore) << decoded.last.error;
  }
}

// A Complete request borrows its key and value bytes from the input.
TEST(CodecBackToBack, DecodedFieldsPointIntoTheInput) {
  const std::string bytes = fromHex("00 0300000000000000 2f6b31 0200000000000000 7631");
  RequestDecoder decoder;
  Request request;
  ASSERT_EQ(decoder.decode(bytes, request).status, DecodeStatus::Complete);
  ASSERT_EQ(request.keys.size(), 1u);
  ASSERT_EQ(request.values.size(), 1u);
  EXPECT_EQ(request.keys[0].data(), bytes.data() + 9);
  EXPECT_EQ(request.values[0].data(), bytes.data() + 20);
}

// A Request object is reused across decodes; nothing of the previous request
// may leak into the next one.
TEST(CodecBackToBack, ReusedRequestIsReset) {
  RequestDecoder decoder;
  Request request;
  const std::string add = fromHex("03 0400000000000000 2f636e74 f9ffffffffffffff");
  const std::string numkeys = fromHex("06");
  ASSERT_EQ(decoder.decode(add, request).status, DecodeStatus::Complete);
  ASSERT_EQ(decoder.decode(numkeys, request).status, DecodeStatus::Complete);
  EXPECT_EQ(request.command, Command::GetNumKeys);
  EXPECT_TRUE(request.keys.empty());
  EXPECT_TRUE(request.values.empty());
  EXPECT_EQ(request.number, 0);
}

// With small limits every hint stays within max_request_bytes even when the
// fields announce more than the limit could hold.
TEST(CodecIncrementalLimits, HintNeverExceedsASmallRequestLimit) {
  Limits limits;
  limits.max_request_bytes = 40;
  // MULTI_SET of 2 pairs (at least 1 + 8 + 2*16 = 41 bytes) cannot fit: Bad, not NeedMore.
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern, limits);
  Request request;
  const DecodeResult result = decoder.decode(fromHex("0b 0200000000000000"), request);
  EXPECT_EQ(result.status, DecodeStatus::Bad) << "hint " << result.size;
}

}  // namespace
}  // namespace ddprun::proto::testing
