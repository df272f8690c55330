// The survivors' side of a lost agent (etcd_lease_verdict.hpp): asks etcd
// how long the leases this agent watches have left, and revokes one that
// etcd says went unrenewed for its agent's whole keep-alive bound, so the
// run re-forms then, not at etcd's next expiry scan.
//
// Owns its thread: every 100 ms it reads which leases to watch from the view
// (the coordinator's, or every member's while this agent coordinates), and
// asks each one when it is due: about once a second while its reading is
// 2 s or more, every 20 ms once it reads 1 s. A lease etcd no longer has, or
// one granted without the margin, is not asked again. Errors (etcd
// unavailable) are retried on the next turn; the revocation itself goes
// through raft, so without quorum it does not happen. Destruction stops and
// joins the thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "ddprun/launcher/etcd/etcd_client.hpp"
#include "ddprun/launcher/etcd/etcd_lease_verdict.hpp"
#include "ddprun/launcher/etcd/etcd_records.hpp"
#include "etcd_view.hpp"

namespace ddprun::launcher::etcd_rdzv {

class EtcdLeaseWatch {
 public:
  EtcdLeaseWatch(etcd::Client& client, EtcdView& view, Keys keys, std::string agent_id);
  ~EtcdLeaseWatch();
  EtcdLeaseWatch(const EtcdLeaseWatch&) = delete;
  EtcdLeaseWatch& operator=(const EtcdLeaseWatch&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  struct Tracked {
    WatchedLease lease;
    Clock::time_point ask_at;
    bool forgotten = false;
  };

  void run();
  void follow(const std::vector<WatchedLease>& watched);
  void ask(Tracked& tracked);
  void revoke(Tracked& tracked);

  etcd::Client& client_;
  EtcdView& view_;
  Keys keys_;
  std::string agent_id_;
  std::map<std::int64_t, Tracked> tracked_;  // by lease id; the thread's own
  std::int64_t followed_revision_ = -1;      // the view's revision tracked_ follows

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ddprun::launcher::etcd_rdzv
