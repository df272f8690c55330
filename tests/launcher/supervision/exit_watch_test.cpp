// ExitWatch says a child has exited only when the kernel does (a white-box
// test of a header private to the launcher).
#include "ddprun/launcher/supervision/exit_watch.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <csignal>
#include <memory>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = net::asio;
using namespace std::chrono_literals;

SpawnOptions command(std::vector<std::string> argv) {
  SpawnOptions options;
  options.argv = std::move(argv);
  options.env = {{"PATH", "/usr/bin:/bin"}};
  return options;
}

// Blocks until the pidfd says its child has exited (it is left unreaped).
bool exitedWithin(const Subprocess& child, std::chrono::milliseconds timeout) {
  pollfd watch{child.pidfd(), POLLIN, 0};
  return poll(&watch, 1, static_cast<int>(timeout.count())) == 1;
}

// The agent's turn between two groups: the stopped group's worker had
// exited and its watch's readiness was already queued when the same turn
// closed that watch and opened the next worker's. Asio hands the closed
// descriptor's queued readiness to the new one (their state is recycled),
// and the next group's live worker was taken for exited: the agent then
// blocked in its reap, deaf to everything, for as long as that worker ran
// (seen in NetnsChaosTest under load: an agent outliving its guardian).
TEST(ExitWatchTest, TheLastReadinessOfAClosedWatchIsNotTakenForTheNextChildsExit) {
  Subprocess gone(command({"true"}));
  Subprocess running(command({"sleep", "30"}));
  ASSERT_TRUE(exitedWithin(gone, 5s));
  asio::io_context io;
  bool gone_reported = false;
  bool running_reported = false;
  auto gone_watch = std::make_unique<ExitWatch>(
      io, gone.pidfd(), [&] { gone_reported = true; }, "gone");
  std::unique_ptr<ExitWatch> running_watch;
  // Queued before the loop's first look at its descriptors, so it runs in
  // the turn that queues the gone child's readiness, before that readiness.
  asio::post(io, [&] {
    gone_watch.reset();
    running_watch = std::make_unique<ExitWatch>(
        io, running.pidfd(), [&] { running_reported = true; }, "running");
  });
  io.run_for(300ms);
  EXPECT_FALSE(gone_reported) << "a destroyed watch called back";
  EXPECT_FALSE(running_reported) << "a running child was reported as exited";

  // Its real exit is still seen.
  ASSERT_TRUE(running.signalGroup(SIGKILL));
  io.restart();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!running_reported && std::chrono::steady_clock::now() < deadline) {
    io.run_for(50ms);
    io.restart();
  }
  EXPECT_TRUE(running_reported) << "the child's exit was never reported";
}

TEST(ExitWatchTest, AnExitIsReportedOnceAndNotAfterTheWatchIsGone) {
  Subprocess child(command({"true"}));
  asio::io_context io;
  int reports = 0;
  auto watch = std::make_unique<ExitWatch>(
      io, child.pidfd(), [&] { ++reports; }, "child");
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (reports == 0 && std::chrono::steady_clock::now() < deadline) {
    io.run_for(50ms);
    io.restart();
  }
  io.run_for(100ms);
  EXPECT_EQ(reports, 1);
  watch.reset();
  io.restart();
  io.run_for(50ms);
  EXPECT_EQ(reports, 1);
}

}  // namespace
}  // namespace ddprun::launcher
