// The rendezvous' read-only questions ("ddprun/query/<question>") through a
// real ddprund server on loopback: answered by a plain GET, stored nowhere,
// never writable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ddprun/proto/errors.hpp"
#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"
#include "test_agent.hpp"

namespace ddprun::rdzv {
namespace {

using namespace std::chrono_literals;
namespace protocol = proto::rendezvous;

class RendezvousQueryTest : public ::testing::Test {
 protected:
  void SetUp() override { server_ = testing::startLoopbackServer(); }

  StoreClient client() { return StoreClient("127.0.0.1", server_->port(), 10s); }

  std::unique_ptr<Server> server_;
};

std::int64_t steadyNs(StoreClient& asker) {
  return nlohmann::json::parse(asker.query(protocol::queryKey(protocol::kQueryClock)))
      .at("steady_ns")
      .get<std::int64_t>();
}

TEST_F(RendezvousQueryTest, TheClockIsTheDaemonsMonotonicClockAndStoresNothing) {
  StoreClient asker = client();
  const auto before = std::chrono::steady_clock::now().time_since_epoch();
  const std::int64_t first = steadyNs(asker);
  const std::int64_t second = steadyNs(asker);
  const auto after = std::chrono::steady_clock::now().time_since_epoch();
  // Same host, same clock: the answers lie between this process' readings.
  EXPECT_LE(std::chrono::nanoseconds(before).count(), first);
  EXPECT_LE(first, second);
  EXPECT_LE(second, std::chrono::nanoseconds(after).count());
  EXPECT_EQ(asker.numKeys(), 0);
}

TEST_F(RendezvousQueryTest, AnUnknownQuestionIsAnErrorAnswerAndTheConnectionServesOn) {
  StoreClient asker = client();
  const auto answer = nlohmann::json::parse(asker.query(protocol::queryKey("weather")));
  EXPECT_NE(answer.at("error").get<std::string>().find("weather"), std::string::npos);
  asker.set("plain", "1");
  EXPECT_EQ(asker.get("plain"), "1");
}

// Questions are client bytes, echoed in the error answer: invalid UTF-8 in
// one must not end the daemon (JSON text cannot hold it as it is).
TEST_F(RendezvousQueryTest, AQuestionThatIsNotUtf8IsAnsweredAndTheDaemonServesOthers) {
  StoreClient asker = client();
  const auto answer = nlohmann::json::parse(asker.query(protocol::queryKey("weather\xff")));
  EXPECT_NE(answer.at("error").get<std::string>().find("weather\xEF\xBF\xBD"), std::string::npos)
      << "the invalid byte is written as U+FFFD";
  StoreClient other = client();
  other.set("plain", "1");
  EXPECT_EQ(other.get("plain"), "1");
  EXPECT_GT(steadyNs(asker), 0) << "the asker's connection serves on";
}

TEST_F(RendezvousQueryTest, NoCommandWritesAQueryKey) {
  const std::string key = protocol::queryKey(protocol::kQueryClock);
  StoreClient setter = client();
  setter.set(key, "0");
  EXPECT_THROW(setter.ping(), Error);
  StoreClient adder = client();
  EXPECT_THROW(adder.add(key, 1), Error);
  StoreClient reader = client();
  EXPECT_EQ(reader.numKeys(), 0);
  EXPECT_GT(steadyNs(reader), 0);
}

}  // namespace
}  // namespace ddprun::rdzv
