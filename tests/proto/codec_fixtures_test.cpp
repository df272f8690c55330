// Real client byte streams: every captured client-to-server stream decodes
// into complete requests, in the order the fixtures' README lists them, and
// re-encodes to exactly the captured bytes.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <map>

#include "codec_test_support.hpp"
#include "ddprun/test_support/fixture_log.hpp"

namespace ddprun::proto::testing {
namespace {

namespace fs = std::filesystem;

using test_support::fixturesDir;

// conn id -> its C>S bytes, concatenated in file order (fixtures README).
std::map<int, std::string> clientStreams(const fs::path& file) {
  const auto log = test_support::FixtureLog::load(file);
  std::map<int, std::string> streams;
  for (int conn : log.connections()) {
    streams[conn] = log.stream(conn, test_support::Direction::ClientToServer);
  }
  return streams;
}

struct ConnExpectation {
  int conn;
  Dialect dialect;
  std::string commands;  // commandName()s separated by spaces
};

struct FixtureCase {
  std::string file;
  std::vector<ConnExpectation> conns;  // conns with client bytes; all others must be silent
};

// Command sequences transcribed from the fixtures' README tables.
std::vector<FixtureCase> fixtureCases() {
  const std::string kHandshake = "VALIDATE PING";
  std::vector<FixtureCase> cases = {
      {"torch113-client-all-ops.jsonl",
       {{1, Dialect::Legacy113,
         "SET WAIT GET ADD ADD ADD WAIT GET COMPARE_SET COMPARE_SET COMPARE_SET COMPARE_SET "
         "GETNUMKEYS DELETE_KEY DELETE_KEY WAIT WAIT ADD WAIT"}}},
      {"torch113-client-to-torch26-server.jsonl", {{1, Dialect::Legacy113, "SET WAIT"}}},
      {"torch113-init-process-group-gloo.jsonl",
       {{1, Dialect::Legacy113,
         "ADD SET WAIT GET SET WAIT WAIT GET ADD ADD ADD WAIT WAIT GET "
         "SET WAIT GET SET WAIT WAIT GET ADD ADD WAIT WAIT GET"}}},
      {"torch113-init-process-group-agent-store.jsonl",
       {{1, Dialect::Legacy113,
         "ADD SET WAIT GET SET WAIT WAIT GET ADD ADD WAIT WAIT GET "
         "SET WAIT GET SET WAIT WAIT GET ADD ADD WAIT WAIT GET"},
        {3, Dialect::Legacy113,
         "ADD SET SET WAIT WAIT GET ADD ADD SET SET SET WAIT WAIT GET ADD ADD SET"}}},
      {"torch113-torchrun-c10d-rendezvous.jsonl",
       {{1, Dialect::Legacy113,
         "COMPARE_SET WAIT GET COMPARE_SET SET WAIT GET SET WAIT GET SET SET "
         "WAIT GET WAIT GET WAIT GET WAIT GET COMPARE_SET"}}},
      {"torch26-client-all-ops.jsonl",
       {{1, Dialect::Modern,
         kHandshake + " SET WAIT GET ADD COMPARE_SET COMPARE_SET COMPARE_SET CHECK CHECK "
                      "GETNUMKEYS DELETE_KEY APPEND APPEND MULTI_SET WAIT MULTI_GET WAIT "
                      "CANCEL_WAIT ADD"}}},
      {"torch26-init-process-group-gloo.jsonl",
       {{1, Dialect::Modern, kHandshake + " ADD SET WAIT WAIT GET SET WAIT WAIT GET"}}},
      {"torch26-client-to-torch113-server.jsonl", {}},
  };
  for (int conn = 1; conn <= 6; ++conn) {
    cases.back().conns.push_back({conn, Dialect::Modern, kHandshake});
  }
  return cases;
}

void PrintTo(const FixtureCase& fixture, std::ostream* os) { *os << fixture.file; }

std::string commandsOf(const std::vector<OwnedRequest>& requests) {
  std::string out;
  for (const OwnedRequest& request : requests) {
    out += (out.empty() ? "" : " ") + std::string(commandName(request.command));
  }
  return out;
}

class CodecFixtures : public ::testing::TestWithParam<FixtureCase> {
 protected:
  void SetUp() override {
    if (const auto problem = test_support::fixturesProblem()) {
      FAIL() << *problem;
    }
    streams_ = clientStreams(fixturesDir() / GetParam().file);
  }

  const ConnExpectation* expectationFor(int conn) const {
    for (const ConnExpectation& e : GetParam().conns) {
      if (e.conn == conn) {
        return &e;
      }
    }
    return nullptr;
  }

  std::map<int, std::string> streams_;
};

// The whole stream is complete requests: nothing left over, since every
// capture ends at a request boundary.
TEST_P(CodecFixtures, EveryStreamDecodesCompletely) {
  ASSERT_FALSE(streams_.empty()) << "no C>S records in " << GetParam().file;
  for (const auto& [conn, stream] : streams_) {
    SCOPED_TRACE("conn " + std::to_string(conn));
    const ConnExpectation* expected = expectationFor(conn);
    if (expected == nullptr) {
      EXPECT_TRUE(stream.empty()) << "an unexpected client stream of " << stream.size() << " bytes";
      continue;
    }
    RequestDecoder decoder;
    const StreamDecode decoded = decodeStream(decoder, stream);
    EXPECT_EQ(decoded.last.status, DecodeStatus::NeedMore) << decoded.last.error;
    EXPECT_EQ(decoded.consumed, stream.size())
        << "left over: " << toHex(stream.substr(decoded.consumed));
    EXPECT_EQ(decoder.dialect(), expected->dialect);
    EXPECT_EQ(commandsOf(decoded.requests), expected->commands);
  }
}

TEST_P(CodecFixtures, EveryExpectedConnectionIsInTheCapture) {
  for (const ConnExpectation& e : GetParam().conns) {
    EXPECT_TRUE(streams_.count(e.conn)) << "conn " << e.conn;
  }
}

// Re-encoding the decoded requests gives back the captured bytes exactly.
TEST_P(CodecFixtures, ReencodingReproducesTheCapture) {
  for (const auto& [conn, stream] : streams_) {
    SCOPED_TRACE("conn " + std::to_string(conn));
    RequestDecoder decoder;
    const StreamDecode decoded = decodeStream(decoder, stream);
    std::string reencoded;
    for (const OwnedRequest& request : decoded.requests) {
      reencoded += encode(decoder.dialect(), request);
    }
    EXPECT_EQ(toHex(reencoded), toHex(stream));
  }
}

// The same requests come out when the stream trickles in one byte at a time.
TEST_P(CodecFixtures, ByteByByteMatchesWholeStream) {
  for (const auto& [conn, stream] : streams_) {
    SCOPED_TRACE("conn " + std::to_string(conn));
    RequestDecoder whole;
    RequestDecoder trickle;
    const StreamDecode expected = decodeStream(whole, stream);
    const StreamDecode actual = decodeByteByByte(trickle, stream);
    EXPECT_EQ(actual.requests, expected.requests);
    EXPECT_EQ(actual.consumed, stream.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Captures, CodecFixtures, ::testing::ValuesIn(fixtureCases()),
                         [](const auto& test) {
                           const std::string& file = test.param.file;
                           std::string name;
                           for (char c : file.substr(0, file.find('.'))) {
                             name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           }
                           return name;
                         });

// Spot checks of decoded fields against the README's narrative, so a decoder
// that got the command order right but mangled fields still fails.
TEST(CodecFixturesFields, Torch113AllOpsFields) {
  if (const auto problem = test_support::fixturesProblem()) {
    FAIL() << *problem;
  }
  const auto streams = clientStreams(fixturesDir() / "torch113-client-all-ops.jsonl");
  RequestDecoder decoder;
  const StreamDecode decoded = decodeStream(decoder, streams.at(1));
  ASSERT_EQ(decoded.requests.size(), 19u);
  EXPECT_EQ(decoded.requests[5].number, -7);  // add("cnt", -7)
  EXPECT_EQ(decoded.requests[11].keys, (std::vector<std::string>{"/cs"}));
  EXPECT_EQ(decoded.requests[11].values, (std::vector<std::string>{"wrong", "z"}));
  EXPECT_EQ(decoded.requests[15].keys, (std::vector<std::string>{"/cnt", "/cs"}));
  EXPECT_EQ(decoded.requests[18].keys, (std::vector<std::string>{"/nokey"}));
}

TEST(CodecFixturesFields, Torch26AllOpsFields) {
  if (const auto problem = test_support::fixturesProblem()) {
    FAIL() << *problem;
  }
  const auto streams = clientStreams(fixturesDir() / "torch26-client-all-ops.jsonl");
  RequestDecoder decoder;
  const StreamDecode decoded = decodeStream(decoder, streams.at(1));
  ASSERT_EQ(decoded.requests.size(), 21u);
  EXPECT_EQ(decoded.requests[1].word, 0x4f6bu);  // PING nonce = the client's pid
  EXPECT_EQ(decoded.requests[9].keys, (std::vector<std::string>{"/k1", "/nope"}));
  EXPECT_EQ(decoded.requests[14].values, (std::vector<std::string>{"yz"}));
  EXPECT_EQ(decoded.requests[15].keys, (std::vector<std::string>{"/m1", "/m2"}));
  EXPECT_EQ(decoded.requests[15].values, (std::vector<std::string>{"a", "bb"}));
  EXPECT_EQ(decoded.requests[17].keys, (std::vector<std::string>{"/m1", "/m2", "/ap"}));
}

}  // namespace
}  // namespace ddprun::proto::testing
