// --rdzv-conf, typed: every key one of torchrun's rendezvous backends reads,
// checked once when the command line is parsed, so a bad key or value is one
// line naming both (exit 2) whichever backend would have read it. Unset keys
// stay unset; the accessors apply torchrun's defaults (docs/torchrun-contract.md
// §6.4). A plain value, read-only after parsing.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

struct RdzvConf {
  using Duration = std::chrono::milliseconds;

  // static (and etcd's v1 protocol): the store's timeout. c10d reads it as
  // join_timeout when join_timeout is absent, as users expect it to.
  std::optional<Duration> timeout;
  std::optional<Duration> join_timeout;
  std::optional<Duration> last_call_timeout;
  std::optional<Duration> keep_alive_interval;
  std::optional<int> keep_alive_max_attempt;
  std::optional<bool> is_host;
  // ddprun's own: a file holding the job's rendezvous token (c10d); agents
  // prove they hold it when they join, and an agent that hosts the
  // rendezvous requires that proof of the others.
  std::optional<std::string> token_file;
  // ddprun's own (c10d and etcd): a host blamed for quarantine_after group
  // failures (a worker of its failed first) is left out of the rounds for
  // quarantine_seconds, while --nnodes' minimum holds without it; 0: never.
  std::optional<int> quarantine_after;
  std::optional<Duration> quarantine_seconds;
  // Accepted for compatibility; ddprun's rendezvous has no use for them
  // (its requests are answered at once, and closing is one message).
  std::optional<Duration> close_timeout;
  std::optional<Duration> read_timeout;
  std::optional<Duration> heartbeat_timeout;
  // etcd backends' connection settings (protocol, cacert, cert, key, ...),
  // kept verbatim for the etcd backend.
  std::map<std::string, std::string> etcd;

  // Effective values, with torchrun's defaults.
  Duration staticTimeout() const { return timeout.value_or(std::chrono::seconds(900)); }
  Duration joinTimeout() const {
    return join_timeout ? *join_timeout : timeout.value_or(std::chrono::seconds(600));
  }
  Duration lastCallTimeout() const { return last_call_timeout.value_or(std::chrono::seconds(30)); }
  Duration keepAliveInterval() const {
    return keep_alive_interval.value_or(std::chrono::seconds(5));
  }
  int keepAliveMaxAttempt() const { return keep_alive_max_attempt.value_or(3); }
  int quarantineAfter() const { return quarantine_after.value_or(3); }
  Duration quarantineDuration() const {
    return quarantine_seconds.value_or(std::chrono::seconds(600));
  }

  bool operator==(const RdzvConf&) const = default;
};

// Types the KEY=VALUE pairs of --rdzv-conf (already split, see
// parseRdzvConfPairs). Throws ConfigError "<what> <key> '<value>': <why>" for
// an unknown key or a value of the wrong kind: durations are seconds > 0
// (decimals allowed), keep_alive_max_attempt an integer >= 1, is_host one of
// 1/true/t/yes/y/0/false/f/no/n, store_type tcp (file stores are not
// supported), rank an integer >= 0 (static's rank is always --node-rank),
// quarantine_after an integer >= 0.
// Durations, and keep_alive_interval x keep_alive_max_attempt (the keep-alive
// timeout the daemon keeps), are at most 1e9 s.
RdzvConf typeRdzvConf(std::string_view what, const std::map<std::string, std::string>& pairs);

}  // namespace ddprun::launcher
