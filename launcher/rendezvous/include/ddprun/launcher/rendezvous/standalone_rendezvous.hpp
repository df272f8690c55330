// A job on one node (--standalone, torchrun's single-node default, and c10d
// with --nnodes 1): the agent hosts the workers' store on a free loopback
// port (no port race) and every attempt starts on an empty store. Nothing to
// wait for: nextGroup() never blocks. Owns the store server (its own Asio
// thread); the Rendezvous calls come as rendezvous.hpp says.
#pragma once

#include <memory>

#include "ddprun/launcher/core/rendezvous.hpp"

namespace ddprun::rdzv {
class Server;
}

namespace ddprun::launcher {

class StandaloneRendezvous final : public Rendezvous {
 public:
  // Binds the store on 127.0.0.1, port 0.
  explicit StandaloneRendezvous(int nproc);
  ~StandaloneRendezvous() override;

  std::string describe() const override;
  std::optional<WorkerGroup> nextGroup() override;
  void cancelWait() override {}
  bool answersAtOnce() const override { return true; }
  // No rendezvous to ask: this host's own monotonic clock (ownClock()), at once.
  void watchClock(std::function<void(const ClockOffset&)> measured) override;
  int finishJob(const RunResult& result) override { return result.exit_code; }

 private:
  std::unique_ptr<rdzv::Server> store_;
  WorkerGroup group_;
  bool started_ = false;
};

}  // namespace ddprun::launcher
