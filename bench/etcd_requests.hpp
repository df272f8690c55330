// etcd's own pace on rdzv_bench's cluster: the requests that lie one after
// the other on an etcd rendezvous's path, each timed alone through ddprun's
// etcd client (etcd's JSON gateway, one kept-alive connection). The last
// agent to join grants its lease, then puts its membership key on it; the
// coordinator, told by its watch, then writes the round's state in a
// transaction. c10d decides the same round in ddprund's memory, so these
// three, added to c10d's figure, are the least an etcd round can take here.
// Runs on the caller's thread; owns nothing past the call.
#pragma once

#include <string>

#include "launch_report.hpp"

namespace ddprun::bench {

struct EtcdRequestTimes {
  Samples grant;              // LeaseGrant
  Samples put;                // Put of a key on that lease
  Samples txn;                // Txn: compare the key's mod revision, put another key
  Samples serializable_read;  // Range answered from the member's own copy: no raft
  // grant + put + txn, each sample's three in a row: the round's floor over c10d.
  Samples three_writes;

  bool empty() const { return three_writes.empty(); }
};

// `samples` rounds of the four requests against `endpoints` ("host:port,..."),
// under keys of their own. Throws etcd::EtcdUnavailable when no member answers.
EtcdRequestTimes timeEtcdRequests(const std::string& endpoints, int samples);

}  // namespace ddprun::bench
