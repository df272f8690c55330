// The line between a group's agents over its workers' store: a node that
// asks gets every other node's answer, one that never answers is named
// silent once the bound has passed, an agent never hears its own request,
// and a channel destroyed while it listens or asks stops at once.
#include "ddprun/launcher/rendezvous/store_peer_channel.hpp"

#include <gtest/gtest.h>

#include <future>

#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

class StorePeerChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdzv::ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<rdzv::Server>(options);
    server_->start();
  }

  WorkerGroup group(int group_rank, int group_world_size = 3) const {
    WorkerGroup group;
    group.attempt = 4;
    group.group_rank = group_rank;
    group.group_world_size = group_world_size;
    group.store_host = "127.0.0.1";
    group.store_port = server_->port();
    return group;
  }

  struct Answers {
    std::vector<StackAnswer> answers;
    std::vector<int> silent;
  };

  std::unique_ptr<rdzv::Server> server_;
};

TEST_F(StorePeerChannelTest, EveryOtherNodeAnswersAndASilentOneIsNamed) {
  StorePeerChannel asker(group(0));
  StorePeerChannel answering(group(1));
  std::promise<StackRequest> asked;
  answering.listen([&](const StackRequest& request) {
    asked.set_value(request);
    answering.answerStacks("h1: local rank 0 (pid 7): /run/attempt_4/0/stack.txt");
  });
  // Node 2 never listens: a node in trouble of its own.
  std::promise<Answers> answered;
  const auto started = std::chrono::steady_clock::now();
  asker.askForStacks("rank 1 (local rank 1 on h0) is hung", 1500ms,
                     [&](std::vector<StackAnswer> answers, std::vector<int> silent) {
                       answered.set_value({std::move(answers), std::move(silent)});
                     });
  auto request = asked.get_future();
  ASSERT_EQ(request.wait_for(10s), std::future_status::ready);
  const StackRequest got = request.get();
  EXPECT_EQ(got.group_rank, 0);
  EXPECT_EQ(got.why, "rank 1 (local rank 1 on h0) is hung");
  auto result = answered.get_future();
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  const Answers answers = result.get();
  EXPECT_GE(std::chrono::steady_clock::now() - started, 1400ms) << "waited for node 2";
  ASSERT_EQ(answers.answers.size(), 1u);
  EXPECT_EQ(answers.answers[0].group_rank, 1);
  EXPECT_EQ(answers.answers[0].where, "h1: local rank 0 (pid 7): /run/attempt_4/0/stack.txt");
  EXPECT_EQ(answers.silent, std::vector<int>{2});
}

TEST_F(StorePeerChannelTest, AnAgentDoesNotHearItsOwnRequest) {
  StorePeerChannel both(group(0, 2));
  StorePeerChannel other(group(1, 2));
  bool heard_itself = false;
  both.listen([&](const StackRequest&) { heard_itself = true; });
  other.listen([&](const StackRequest&) { other.answerStacks("h1: no worker running"); });
  std::promise<Answers> answered;
  both.askForStacks("hung", 5s, [&](std::vector<StackAnswer> answers, std::vector<int> silent) {
    answered.set_value({std::move(answers), std::move(silent)});
  });
  auto result = answered.get_future();
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(result.get().answers.size(), 1u);
  EXPECT_FALSE(heard_itself);
}

TEST_F(StorePeerChannelTest, DestroyingAListeningChannelStopsAtOnce) {
  const auto started = std::chrono::steady_clock::now();
  {
    StorePeerChannel listening(group(1));
    listening.listen([](const StackRequest&) { ADD_FAILURE() << "nobody asked"; });
    rdzv::StoreClient probe("127.0.0.1", server_->port(), 5s);  // it is connected and waiting
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
}

}  // namespace
}  // namespace ddprun::launcher
