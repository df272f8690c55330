// torch's file-timer requests as FileTimerClient writes them, and the
// FileTimerServer's bookkeeping ddprun keeps (docs/torchrun-contract.md §7.6):
// set and replace per (pid, scope), release by a negative expiration, expiry
// per pid with every timer of a reaped pid forgotten, the reaping signal,
// and lines that are not requests.
#include "ddprun/launcher/watchdogs/timer_requests.hpp"

#include <gtest/gtest.h>

namespace ddprun::launcher {
namespace {

TimerRequest request(pid_t pid, std::string scope, double expiration, int signal = 9) {
  return {pid, std::move(scope), expiration, signal};
}

TimerRequest parsed(std::string_view line) {
  auto result = parseTimerRequest(line);
  if (auto* why = std::get_if<std::string>(&result)) {
    ADD_FAILURE() << line << ": " << *why;
    return {};
  }
  return std::get<TimerRequest>(result);
}

std::string whyNot(std::string_view line) {
  auto result = parseTimerRequest(line);
  const auto* why = std::get_if<std::string>(&result);
  return why != nullptr ? *why : "<a request>";
}

// What FileTimerRequest.to_json() writes (json.dumps' default separators).
TEST(TimerRequests, TorchsAcquireAndRelease) {
  EXPECT_EQ(parsed(R"({"version": 1, "pid": 4242, "scope_id": "/w/train.py#12", )"
                   R"("expiration_time": 1700000000.25, "signal": 9})"),
            request(4242, "/w/train.py#12", 1700000000.25, 9));
  const TimerRequest release =
      parsed(R"({"version": 1, "pid": 4242, "scope_id": "step", "expiration_time": -1, )"
             R"("signal": 0})");
  EXPECT_TRUE(release.release());
  EXPECT_FALSE(request(1, "s", 0).release()) << "only a negative expiration releases";
  // Keys in any order, an integer time, no version: torch reads only the four.
  EXPECT_EQ(parsed(R"({"signal":15,"expiration_time":5,"scope_id":"","pid":7})"),
            request(7, "", 5, 15));
}

TEST(TimerRequests, LinesThatAreNotRequestsSayWhy) {
  EXPECT_EQ(whyNot("hello"), "not a JSON object");
  EXPECT_EQ(whyNot(R"({"pid": 1)"), "not a JSON object");
  EXPECT_EQ(whyNot("[1, 2]"), "not a JSON object");
  EXPECT_EQ(whyNot(R"({"pid": 1, "scope_id": "s", "expiration_time": 1})"), "no \"signal\"");
  EXPECT_EQ(whyNot(R"({"scope_id": "s", "expiration_time": 1, "signal": 9})"), "no \"pid\"");
  EXPECT_EQ(whyNot(R"({"pid": "1", "scope_id": "s", "expiration_time": 1, "signal": 9})"),
            "\"pid\" is not a process id");
  // 0 and -1 would name a process group or every process to kill().
  EXPECT_EQ(whyNot(R"({"pid": 0, "scope_id": "s", "expiration_time": 1, "signal": 9})"),
            "\"pid\" is not a process id");
  EXPECT_EQ(whyNot(R"({"pid": -1, "scope_id": "s", "expiration_time": 1, "signal": 9})"),
            "\"pid\" is not a process id");
  EXPECT_EQ(whyNot(R"({"pid": 1, "scope_id": 3, "expiration_time": 1, "signal": 9})"),
            "\"scope_id\" is not a string");
  EXPECT_EQ(whyNot(R"({"pid": 1, "scope_id": "s", "expiration_time": "soon", "signal": 9})"),
            "\"expiration_time\" is not a number");
  EXPECT_EQ(whyNot(R"({"pid": 1, "scope_id": "s", "expiration_time": 1, "signal": 9.5})"),
            "\"signal\" is not an integer");
}

TEST(TimerTable, ARequestSetsOrReplacesItsScopesTimerAndAReleaseRemovesIt) {
  TimerTable table;
  table.apply(request(10, "a", 100));
  table.apply(request(10, "b", 50));
  table.apply(request(11, "a", 70));
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(table.nextExpiration(), 50);
  table.apply(request(10, "b", 200));  // re-armed: replaces
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(table.nextExpiration(), 70);
  table.apply(request(11, "a", -1, 0));  // released
  table.apply(request(12, "never set", -1, 0));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.nextExpiration(), 100);
  EXPECT_TRUE(table.takeExpired(99).empty());
  table.clear();
  EXPECT_FALSE(table.nextExpiration());
}

TEST(TimerTable, ExpiryIsPerPidAndForgetsEveryTimerOfThatPid) {
  TimerTable table;
  table.apply(request(20, "late", 300));
  table.apply(request(20, "second", 120, 15));
  table.apply(request(20, "first", 110, 9));
  table.apply(request(30, "other", 400));
  const auto expired = table.takeExpired(150);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].pid, 20);
  ASSERT_EQ(expired[0].timers.size(), 2u) << "only the expired ones are reported";
  EXPECT_EQ(expired[0].timers[0].scope_id, "first") << "earliest first";
  EXPECT_EQ(expired[0].reaping()->scope_id, "first");
  EXPECT_EQ(table.size(), 1u) << "pid 20's unexpired 'late' went with it; pid 30 stays";
  EXPECT_EQ(table.nextExpiration(), 400);
  EXPECT_EQ(table.takeExpired(400).at(0).pid, 30) << "a deadline equal to now has expired";
}

// torch reaps with the earliest expired timer that has a signal > 0, and
// leaves the pid alone when none has.
TEST(TimerTable, TheReapingSignalIsTheEarliestPositiveOne) {
  TimerTable table;
  table.apply(request(40, "quiet", 10, 0));
  table.apply(request(40, "loud", 20, 15));
  table.apply(request(50, "quiet too", 10, -3));
  const auto expired = table.takeExpired(30);
  ASSERT_EQ(expired.size(), 2u);
  ASSERT_NE(expired[0].reaping(), nullptr);
  EXPECT_EQ(expired[0].reaping()->signal, 15);
  EXPECT_EQ(expired[1].reaping(), nullptr);
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
}  // namespace ddprun::launcher
