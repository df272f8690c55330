// Golden bytes: encodeRequest produces the exact bytes given in
// docs/tcpstore-protocol.md for every command of every dialect, and the decoder
// turns those bytes back into the same request.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <utility>

#include "codec_test_support.hpp"

namespace ddprun::proto::testing {
namespace {

class CodecGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(CodecGolden, EncodesTheDocumentedBytes) {
  const GoldenCase& golden = GetParam();
  EXPECT_EQ(toHex(encode(golden.dialect, golden.request)), toHex(golden.bytes));
}

TEST_P(CodecGolden, DecodesTheDocumentedBytes) {
  const GoldenCase& golden = GetParam();
  // VALIDATE is itself the preamble, so it gets a fresh decoder.
  RequestDecoder decoder = golden.request.command == Command::Validate
                               ? RequestDecoder()
                               : decoderAfterPreamble(golden.dialect);
  Request request;
  const DecodeResult result = decoder.decode(golden.bytes, request);
  ASSERT_EQ(result.status, DecodeStatus::Complete) << result.error;
  EXPECT_EQ(result.size, golden.bytes.size());
  EXPECT_EQ(decoder.dialect(), golden.dialect);
  EXPECT_EQ(own(request), golden.request);
}

// Trailing bytes of the next request must be left alone.
TEST_P(CodecGolden, ConsumesOnlyItsOwnBytes) {
  const GoldenCase& golden = GetParam();
  RequestDecoder decoder = golden.request.command == Command::Validate
                               ? RequestDecoder()
                               : decoderAfterPreamble(golden.dialect);
  Request request;
  const DecodeResult result = decoder.decode(golden.bytes + fromHex("06 ffff"), request);
  ASSERT_EQ(result.status, DecodeStatus::Complete) << result.error;
  EXPECT_EQ(result.size, golden.bytes.size());
}

INSTANTIATE_TEST_SUITE_P(AllDialects, CodecGolden, ::testing::ValuesIn(goldenCases()),
                         [](const auto& test) { return test.param.name; });

// The golden table must cover every command that a dialect has, so a command
// added to a dialect without golden bytes fails here.
TEST(CodecGoldenCoverage, EveryCommandOfEveryDialectHasGoldenBytes) {
  std::set<std::pair<Dialect, Command>> covered;
  for (const GoldenCase& golden : goldenCases()) {
    covered.emplace(golden.dialect, golden.request.command);
  }
  for (Dialect dialect : {Dialect::Legacy113, Dialect::Legacy21, Dialect::Modern}) {
    for (int c = 0; c <= static_cast<int>(Command::List); ++c) {
      const auto command = static_cast<Command>(c);
      if (wireByte(dialect, command)) {
        EXPECT_TRUE(covered.count({dialect, command}))
            << commandName(command) << " in " << dialectName(dialect) << " has no golden bytes";
      }
    }
  }
}

TEST(CodecGoldenEncode, RejectsCommandsTheDialectLacks) {
  std::string out;
  Request request;
  request.command = Command::Ping;
  EXPECT_THROW(encodeRequest(Dialect::Legacy113, request, out), std::invalid_argument);
  request.command = Command::Validate;
  EXPECT_THROW(encodeRequest(Dialect::Legacy21, request, out), std::invalid_argument);
  request.command = Command::WatchKey;
  request.keys = {"/k"};
  EXPECT_THROW(encodeRequest(Dialect::Modern, request, out), std::invalid_argument);
  EXPECT_THROW(encodeRequest(Dialect::Legacy21, request, out), std::invalid_argument);
  request.command = Command::Append;
  request.values = {"v"};
  EXPECT_THROW(encodeRequest(Dialect::Legacy113, request, out), std::invalid_argument);
  request.command = Command::Set;
  EXPECT_THROW(encodeRequest(Dialect::Undecided, request, out), std::invalid_argument);
  EXPECT_TRUE(out.empty()) << "a rejected request must not leave bytes behind";
}

TEST(CodecGoldenEncode, AppendsToExistingOutput) {
  std::string out = "xy";
  Request request;
  request.command = Command::CancelWait;
  encodeRequest(Dialect::Modern, request, out);
  encodeRequest(Dialect::Legacy21, request, out);
  EXPECT_EQ(toHex(out), "78790c0b");
}

// WireWriter is what replies are built with (docs/tcpstore-protocol.md §7):
// raw little-endian integers and u64-length-prefixed bytes.
TEST(CodecGoldenWriter, WritesTheDocumentedReplyPrimitives) {
  std::string out;
  WireWriter writer(out);
  writer.i64(-2);          // ADD reply, torch113-client-all-ops line 13
  writer.bytes("v1");      // GET reply
  writer.u8(1);            // NOT_READY / WAIT_CANCELED
  writer.u32(0x00004f6b);  // PING echo
  writer.u64(3);           // GETNUMKEYS reply
  EXPECT_EQ(toHex(out),
            "feffffffffffffff"
            "0200000000000000"
            "7631"
            "01"
            "6b4f0000"
            "0300000000000000");
}

TEST(CodecGoldenWriter, WritesAKeyListAsCountThenStrings) {
  std::string out;
  WireWriter writer(out);
  const std::vector<std::string_view> keys = {"/k1", ""};
  writer.keyList(keys);
  EXPECT_EQ(toHex(out),
            "0200000000000000"
            "0300000000000000"
            "2f6b31"
            "0000000000000000");
}

}  // namespace
}  // namespace ddprun::proto::testing
