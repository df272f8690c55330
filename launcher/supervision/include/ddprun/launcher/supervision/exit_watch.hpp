// Tells the agent's loop, once, that a child has exited. Owns a duplicate of
// the child's pidfd, waited on by the loop; a wake-up the kernel does not
// confirm is waited out again. Asio (1.74's epoll reactor) can hand the last
// readiness of a descriptor closed in one turn of the loop to a descriptor
// opened in the same turn, when they share its recycled state: the next
// group's worker was then taken for exited, and the agent blocked in its
// reap for as long as that worker lived. Loop thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class ExitWatch {
 public:
  // Watches the child behind `pidfd` (borrowed; duplicated here). `on_exit`
  // runs on the loop once the kernel says the child has exited, never after
  // this watch is destroyed. Throws SpawnError naming `what` if the pidfd
  // cannot be duplicated.
  ExitWatch(net::asio::io_context& io, int pidfd, std::function<void()> on_exit,
            const std::string& what);
  ~ExitWatch();
  ExitWatch(const ExitWatch&) = delete;
  ExitWatch& operator=(const ExitWatch&) = delete;

 private:
  struct State;
  static void arm(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;  // also held by the pending wait
};

}  // namespace ddprun::launcher
