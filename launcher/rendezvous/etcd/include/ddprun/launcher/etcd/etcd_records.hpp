// The etcd backend's keys and what they hold (JSON), for one run id under a
// prefix (etcd_prefix, default /ddprun/rendezvous):
//
//   <base>members/<agent>  MemberRecord, under the agent's lease: it is alive
//   <base>coordinator      the elected agent's id, under its lease
//   <base>state            StateRecord, the coordinator's latest decision
//   <base>ready            {"round": N}: node 0 emptied its workers' store for round N
//   <base>restart/<agent>  {"round": N}: the agent's workers failed in round N
//   <base>done/<agent>     {"round": N}: the agent's workers succeeded in round N
//   <base>closed           ClosedRecord: the job is over (under a short lease of its own)
//
// Plain values and pure functions; no I/O. A record that does not parse is
// nullopt (a foreign or corrupt key is ignored, never trusted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::launcher::etcd_rdzv {

struct Keys {
  Keys(const std::string& prefix, const std::string& run_id);

  std::string base;  // "<prefix>/<run id>/"
  std::string members() const { return base + "members/"; }
  std::string member(const std::string& agent) const { return members() + agent; }
  std::string coordinator() const { return base + "coordinator"; }
  std::string state() const { return base + "state"; }
  std::string ready() const { return base + "ready"; }
  std::string restarts() const { return base + "restart/"; }
  std::string restart(const std::string& agent) const { return restarts() + agent; }
  std::string dones() const { return base + "done/"; }
  std::string done(const std::string& agent) const { return dones() + agent; }
  std::string closed() const { return base + "closed"; }
};

struct MemberRecord {
  std::string id;
  int local_world_size = 1;
  std::optional<int> rank_hint;
  std::int64_t last_round = -1;
  std::string store_host;  // the workers' store it serves when it is node 0
  std::uint16_t store_port = 0;
  // The keep-alive bound its lease stands for, in seconds, when the lease was
  // granted a margin longer (etcd_lease_verdict.hpp) so that the others may
  // revoke it once etcd says it went unrenewed that long; 0: no margin (a TTL
  // of 1 s, or an agent from before), never revoked by the others.
  std::int64_t lease_ttl_s = 0;
  bool operator==(const MemberRecord&) const = default;
};

struct NodeRecord {
  std::string id;
  int group_rank = 0;
  int base_rank = 0;
  int local_world_size = 1;
  std::string store_host;
  std::uint16_t store_port = 0;
  bool operator==(const NodeRecord&) const = default;
};

// A host quarantined when the state was written: its agents stand by.
// left_ms is by the coordinator's clock, from the write (no clocks compared).
struct QuarantineRecord {
  std::string host;
  int failures = 0;
  std::int64_t left_ms = 0;
  bool operator==(const QuarantineRecord&) const = default;
};

// A completed round (its nodes in group-rank order), or a suspended one
// (below min_nodes: every member stops its workers and waits).
struct StateRecord {
  std::int64_t round = 0;
  bool suspended = false;
  // The run's first round: no worker has run anywhere yet, so every agent's
  // workers' store is still empty and nobody waits for node 0's ready key.
  bool first = false;
  int world_size = 0;
  std::vector<NodeRecord> nodes;
  // Hosts left out of this round (absent from an older coordinator's).
  std::vector<QuarantineRecord> quarantined{};
  bool operator==(const StateRecord&) const = default;

  const NodeRecord* find(const std::string& id) const;
  const QuarantineRecord* quarantineOf(const std::string& host) const;
};

struct ClosedRecord {
  bool failed = false;
  std::string by;  // the agent whose failure ended the job
  bool operator==(const ClosedRecord&) const = default;
};

std::string encode(const MemberRecord& record);
std::string encode(const StateRecord& record);
std::string encode(const ClosedRecord& record);
std::string encodeRound(std::int64_t round);

std::optional<MemberRecord> decodeMember(const std::string& text);
std::optional<StateRecord> decodeState(const std::string& text);
std::optional<ClosedRecord> decodeClosed(const std::string& text);
std::optional<std::int64_t> decodeRound(const std::string& text);

}  // namespace ddprun::launcher::etcd_rdzv
