// The echo floor's framing: every request the raw load sends gets a reply of
// the size and shape its client waits for, however the bytes are split over
// reads, and what the raw load never sends closes the connection.
#include "echo_floor_framing.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ddprun/proto/tcpstore_codec.hpp"

namespace ddprun::bench {
namespace {

namespace proto = ddprun::proto;

std::string encode(proto::Command command, std::vector<std::string_view> keys,
                   std::vector<std::string_view> values = {}, std::int64_t number = 0) {
  return proto::encodeRequest(
      proto::Dialect::Legacy113,
      proto::makeRequest(command, std::move(keys), std::move(values), number));
}

std::string number(std::uint64_t value) {
  std::string bytes(sizeof(value), '\0');
  std::memcpy(bytes.data(), &value, sizeof(value));
  return bytes;
}

// One raw load cycle on one connection, as raw_load.cpp sends it.
std::string cycle(const std::string& value) {
  return encode(proto::Command::Set, {"/raw/0"}, {value}) +
         encode(proto::Command::Wait, {"/raw/0"}) + encode(proto::Command::Get, {"/raw/0"}) +
         encode(proto::Command::Add, {"/raw/0/n"}, {}, 3) +
         encode(proto::Command::Check, {"/raw/0"});
}

// WAIT's STOP_WAITING, GET's length and value, ADD's total, CHECK's READY.
std::string cycleReplies(const std::string& value, std::uint64_t total) {
  return std::string(1, '\0') + number(value.size()) + value + number(total) + std::string(1, '\0');
}

TEST(EchoFloorFramingTest, AnswersEveryRequestOfTheRawLoad) {
  const std::string value(64, 'v');
  EchoConnection connection;
  std::string reply;
  const std::string probe = encode(proto::Command::Check, {});
  EXPECT_EQ(answerArrived(probe + cycle(value) + cycle(value), connection, reply), nullptr);
  EXPECT_EQ(reply, std::string(1, '\0') + cycleReplies(value, 3) + cycleReplies(value, 6));
  EXPECT_TRUE(connection.partial.empty());
}

TEST(EchoFloorFramingTest, AnswersARequestOnlyOnceAllOfItHasArrived) {
  const std::string value(64, 'v');
  const std::string bytes = cycle(value);
  EchoConnection connection;
  std::string reply;
  for (char byte : bytes) {
    EXPECT_EQ(answerArrived(std::string_view(&byte, 1), connection, reply), nullptr);
  }
  EXPECT_EQ(reply, cycleReplies(value, 3));
  EXPECT_TRUE(connection.partial.empty());
}

TEST(EchoFloorFramingTest, RefusesWhatTheRawLoadNeverSends) {
  EchoConnection connection;
  std::string reply;
  const std::string get_num_keys = encode(proto::Command::GetNumKeys, {});
  EXPECT_NE(answerArrived(get_num_keys, connection, reply), nullptr);
  EXPECT_TRUE(reply.empty());
}

TEST(EchoFloorFramingTest, RefusesARequestLargerThanTheRawLoadSends) {
  EchoConnection connection;
  std::string reply;
  // A GET whose key claims 1 MiB, then 65 KiB of it.
  const std::string start = std::string(1, '\x02') + number(1 << 20);
  EXPECT_EQ(answerArrived(start, connection, reply), nullptr);
  EXPECT_NE(answerArrived(std::string(65 * 1024, 'k'), connection, reply), nullptr);
  EXPECT_TRUE(reply.empty());
}

}  // namespace
}  // namespace ddprun::bench
