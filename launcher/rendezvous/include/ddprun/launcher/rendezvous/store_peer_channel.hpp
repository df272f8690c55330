// A PeerChannel over the group's workers' store (WorkerGroup::store_host and
// store_port), which every backend with more than one node gives its group
// and every agent of it can reach: the asking agent sets
// ddprun/stacks/<attempt>/asked, every other agent waits on that key and
// sets ddprun/stacks/<attempt>/answer/<group rank>. The workers' keys never
// start with "ddprun/", and the store is emptied or replaced for each round.
//
// Owns a listening thread (from listen()), a thread per ask, and a
// connection for each; the callbacks run on them. Destruction interrupts
// both connections and joins both threads.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ddprun/launcher/core/peer_channel.hpp"
#include "ddprun/launcher/core/rendezvous.hpp"

namespace ddprun::rdzv {
class StoreClient;
}

namespace ddprun::launcher {

class StorePeerChannel final : public PeerChannel {
 public:
  explicit StorePeerChannel(WorkerGroup group);
  ~StorePeerChannel() override;
  StorePeerChannel(const StorePeerChannel&) = delete;
  StorePeerChannel& operator=(const StorePeerChannel&) = delete;

  void listen(Asked asked) override;
  void askForStacks(const std::string& why, std::chrono::milliseconds bound,
                    Answered answered) override;
  void answerStacks(const std::string& where) override;

  // The store keys, for the tests.
  std::string askedKey() const;
  std::string answerKey(int group_rank) const;

 private:
  void listenFor(const Asked& asked);
  void ask(const std::string& why, std::chrono::milliseconds bound, const Answered& answered);
  // Connects, unless stopping; the connection is interrupted by the destructor.
  std::unique_ptr<rdzv::StoreClient> connect(rdzv::StoreClient*& slot,
                                             std::chrono::milliseconds timeout);
  void forget(rdzv::StoreClient*& slot);

  WorkerGroup group_;
  std::mutex mutex_;
  std::condition_variable answer_ready_;
  std::optional<std::string> answer_;  // this node's, once given
  bool stopping_ = false;
  rdzv::StoreClient* listening_ = nullptr;  // the threads' connections, to interrupt them
  rdzv::StoreClient* asking_ = nullptr;
  std::thread listener_;
  std::thread asker_;
};

}  // namespace ddprun::launcher
