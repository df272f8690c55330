// ProcessTree's periodic reap of orphans ends with the run: a loop that
// runs nothing else then has no work left and returns (a white-box test of
// a private header: the race is in how its timer is stopped).
#include "ddprun/launcher/supervision/process_tree.hpp"

#include <gtest/gtest.h>

#include <chrono>

#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = net::asio;
using namespace std::chrono_literals;

// The reap falls due in the same turn of the loop that finishes the run:
// its handler is already queued, so cancelling the timer cannot stop it.
// It once armed the timer again, every 2 s for ever, and the agent of a
// finished job never exited.
TEST(ProcessTreeTest, AReapDueWhenTheRunFinishesDoesNotKeepTheLoopAlive) {
  asio::io_context io;
  ProcessTree tree(io, 1ms);
  tree.start(-1);
  // The reap falls due before the loop runs: its first turn collects it,
  // then runs the posted finish(), then the reap's handler.
  const auto due = std::chrono::steady_clock::now() + 5ms;
  while (std::chrono::steady_clock::now() < due) {
  }
  asio::post(io, [&] { tree.finish(0); });
  io.run_for(2s);
  EXPECT_TRUE(io.stopped()) << "the reap timer was armed again after finish()";
}

}  // namespace
}  // namespace ddprun::launcher
