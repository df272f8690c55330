// Whether this node is fit to join a round (docs/reliability-security.md,
// "Node health"): run before every join, so that a node whose GPU, disk or
// network broke stays out and its agent ends with kUnfitExitCode, for
// the scheduler to replace the node, instead of failing every attempt.
//
// Built in, always: the log directory (the run directory) still takes a new
// file; and, from the second join on, the GPUs counted when the agent started
// are all still visible. Then --health-check CMD, through /bin/sh -c, with the
// agent's environment: a non-zero exit, or no exit within its timeout (its
// process group is then killed), is unfit. Blocking: called on the agent's
// waiter thread, before the rendezvous is asked for the next group.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

namespace ddprun::launcher {

struct HealthCheck {
  std::string command;  // --health-check; empty: the built-in checks only
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  std::filesystem::path run_dir;  // must take a new file; empty: none kept
  int gpus_at_start = 0;          // counted when the agent started; 0: none to check
};

// Checks the node before join number `join` (0: the first). nullopt when it
// is fit; else one line saying what failed and why.
std::optional<std::string> checkNodeHealth(const HealthCheck& check, int join);

}  // namespace ddprun::launcher
