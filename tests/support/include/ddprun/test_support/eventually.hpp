// eventually(): polls a condition until it holds or a deadline passes, so
// tests wait for asynchronous effects without fixed sleeps. Runs on the
// calling thread; the predicate is called from that thread only.
#pragma once

#include <chrono>
#include <functional>

namespace ddprun::test_support {

// Calls `predicate` until it returns true (then returns true) or `timeout`
// has passed (then returns false after one last try). Sleeps `interval`
// between tries.
bool eventually(const std::function<bool()>& predicate, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval = std::chrono::milliseconds(5));

}  // namespace ddprun::test_support
