// Decoding costs time in proportion to the request's size, however its bytes
// arrive. Work is counted, not timed: RequestDecoder::fieldsRead() counts
// every wire field each time it is read. A decoder that starts a request over
// on every call does about 16 times the work for 4 times the keys when the
// request comes in pieces; a linear one about 4 times.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "codec_test_support.hpp"

namespace ddprun::proto::testing {
namespace {

// Keys of a few lengths, so that chunk edges fall everywhere in an item.
OwnedRequest multiKeyRequest(Command command, std::size_t keys) {
  OwnedRequest request{command, {}, {}, 0, 0};
  for (std::size_t i = 0; i < keys; ++i) {
    request.keys.push_back("/rank/" + std::to_string(i) + std::string(i % 7, 'k'));
    if (command == Command::MultiSet) {
      request.values.push_back(std::string(i % 5, 'v'));
    }
  }
  return request;
}

struct Fed {
  StreamDecode decoded;
  std::uint64_t work = 0;  // fields read
};

// Decodes `request`'s bytes (after the connection's VALIDATE) in chunks of
// `chunk` bytes and checks that it comes out whole.
Fed feed(const OwnedRequest& request, std::size_t chunk) {
  const std::string bytes = encode(Dialect::Modern, request);
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern);
  const std::uint64_t before = decoder.fieldsRead();
  Fed fed{decodeInChunks(decoder, bytes, chunk), 0};
  fed.work = decoder.fieldsRead() - before;
  EXPECT_EQ(fed.decoded.requests, std::vector<OwnedRequest>{request}) << fed.decoded.last.error;
  EXPECT_EQ(fed.decoded.consumed, bytes.size());
  return fed;
}

struct LinearCase {
  Command command;
  std::size_t chunk;  // bytes per read; SIZE_MAX: the whole request in one buffer
};

void PrintTo(const LinearCase& linear, std::ostream* os) {
  *os << commandName(linear.command) << " in chunks of " << linear.chunk << " bytes";
}

std::string caseName(const ::testing::TestParamInfo<LinearCase>& info) {
  std::string name(commandName(info.param.command));
  name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
  return name + (info.param.chunk == SIZE_MAX ? "_OneBuffer"
                                              : "_Chunks" + std::to_string(info.param.chunk));
}

class CodecLinear : public ::testing::TestWithParam<LinearCase> {};

TEST_P(CodecLinear, FourTimesTheKeysCostAboutFourTimesTheWork) {
  constexpr std::size_t kKeys = 256;
  const LinearCase& param = GetParam();
  const Fed small = feed(multiKeyRequest(param.command, kKeys), param.chunk);
  const Fed large = feed(multiKeyRequest(param.command, 4 * kKeys), param.chunk);
  ASSERT_GT(small.work, 0u);
  const double ratio = static_cast<double>(large.work) / static_cast<double>(small.work);
  EXPECT_LT(ratio, 6.0) << small.work << " fields read for " << kKeys << " keys, " << large.work
                        << " for " << 4 * kKeys;
}

// 1: a client that writes a byte at a time; 7: edges in every part of an
// item; 1448: a loopback or Ethernet segment's payload.
INSTANTIATE_TEST_SUITE_P(
    MultiKeyCommands, CodecLinear, ::testing::ValuesIn([] {
      std::vector<LinearCase> cases;
      for (Command command :
           {Command::Check, Command::Wait, Command::MultiGet, Command::MultiSet}) {
        for (std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{1448}, SIZE_MAX}) {
          cases.push_back({command, chunk});
        }
      }
      return cases;
    }()),
    caseName);

// A connection that reads what each NeedMore hint asks for, and no more.
// Returns the number of reads the request took.
std::size_t readsFollowingTheHint(const std::string& bytes) {
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern);
  Request request;
  std::size_t buffered = 1;  // a read returns at least one byte
  for (std::size_t reads = 1;; ++reads) {
    const DecodeResult result =
        decoder.decode(std::string_view(bytes).substr(0, buffered), request);
    if (result.status != DecodeStatus::NeedMore) {
      EXPECT_EQ(result.status, DecodeStatus::Complete) << result.error;
      return reads;
    }
    EXPECT_GT(result.size, buffered);
    EXPECT_LE(result.size, bytes.size());
    buffered = result.size;
  }
}

// The hint counts the length prefix of every key still to come, so a
// connection reads a long list in a few large reads: their number grows with
// the logarithm of the key count. A hint that named only the next field
// would take two reads per key.
TEST(CodecLinearHint, ReadsToTheHintGrowLogarithmicallyWithTheKeyCount) {
  for (Command command : {Command::Check, Command::Wait, Command::MultiGet, Command::MultiSet}) {
    SCOPED_TRACE(std::string(commandName(command)));
    const std::size_t small =
        readsFollowingTheHint(encode(Dialect::Modern, multiKeyRequest(command, 1024)));
    const std::size_t large =
        readsFollowingTheHint(encode(Dialect::Modern, multiKeyRequest(command, 16 * 1024)));
    EXPECT_LE(small, 64u);
    EXPECT_LT(large, small + 16) << small << " reads for 1024 keys";
  }
}

// A resumed request's fields view the buffer of the call that completed it,
// wherever the earlier calls' bytes were.
TEST(CodecResume, CompletedFieldsViewTheLastBuffer) {
  const OwnedRequest request = multiKeyRequest(Command::MultiSet, 3);
  const std::string bytes = encode(Dialect::Modern, request);
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern);
  Request out;
  std::string first(bytes.substr(0, bytes.size() - 1));
  ASSERT_EQ(decoder.decode(first, out).status, DecodeStatus::NeedMore);
  first.assign(first.size(), 'x');  // the caller reuses its old buffer
  const std::string moved = bytes;
  ASSERT_EQ(decoder.decode(moved, out).status, DecodeStatus::Complete);
  EXPECT_EQ(own(out), request);
  for (const auto& field : {out.keys.front(), out.values.back()}) {
    EXPECT_GE(field.data(), moved.data());
    EXPECT_LE(field.data() + field.size(), moved.data() + moved.size());
  }
}

// Input that does not continue the incomplete request (shorter than what was
// read, or another command) is decoded from its start.
TEST(CodecResume, InputThatDoesNotContinueTheRequestStartsOver) {
  const std::string check = encode(Dialect::Modern, multiKeyRequest(Command::Check, 4));
  const std::string get = fromHex("03 0300000000000000 2f6b31");
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern);
  Request out;
  ASSERT_EQ(decoder.decode(check.substr(0, check.size() - 2), out).status, DecodeStatus::NeedMore);
  const DecodeResult shorter = decoder.decode(check.substr(0, 12), out);
  EXPECT_EQ(shorter.status, DecodeStatus::NeedMore);
  ASSERT_EQ(decoder.decode(check.substr(0, check.size() - 2), out).status, DecodeStatus::NeedMore);
  const DecodeResult other = decoder.decode(get, out);
  ASSERT_EQ(other.status, DecodeStatus::Complete) << other.error;
  EXPECT_EQ(own(out).keys, std::vector<std::string>{"/k1"});
  ASSERT_EQ(decoder.decode(check, out).status, DecodeStatus::Complete);
  EXPECT_EQ(own(out), multiKeyRequest(Command::Check, 4));
}

// Bytes already read that change before the request completes (a caller
// breaking the contract) are caught when the request is collected.
TEST(CodecResume, ChangedBytesAlreadyReadAreCaughtWhenCollected) {
  std::string check = encode(Dialect::Modern, multiKeyRequest(Command::Check, 4));
  RequestDecoder decoder = decoderAfterPreamble(Dialect::Modern);
  Request out;
  ASSERT_EQ(decoder.decode(check.substr(0, check.size() - 2), out).status, DecodeStatus::NeedMore);
  check[10] = '\x7f';  // the first key's length, now over the 8 KiB limit
  const DecodeResult result = decoder.decode(check, out);
  EXPECT_EQ(result.status, DecodeStatus::Bad);
  EXPECT_NE(result.error.find("a key of"), std::string::npos) << result.error;
}

}  // namespace
}  // namespace ddprun::proto::testing
