#include "ddprun/launcher/rendezvous/standalone_rendezvous.hpp"

#include "ddprun/launcher/rendezvous/clock_sync.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {

StandaloneRendezvous::StandaloneRendezvous(int nproc) {
  rdzv::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  store_ = std::make_unique<rdzv::Server>(options);
  store_->start();
  group_.world_size = nproc;
  group_.store_host = "127.0.0.1";
  group_.store_port = store_->port();
}

StandaloneRendezvous::~StandaloneRendezvous() = default;

std::string StandaloneRendezvous::describe() const {
  return "single node, workers' store at 127.0.0.1:" + std::to_string(group_.store_port);
}

void StandaloneRendezvous::watchClock(std::function<void(const ClockOffset&)> measured) {
  if (measured) {
    measured(ownClock());
  }
}

// PyTorch 2.5+ workers do not prefix their keys per attempt: every restart
// starts on an empty store.
std::optional<WorkerGroup> StandaloneRendezvous::nextGroup() {
  if (started_) {
    store_->clearKeySpace();
    ++group_.attempt;
  }
  started_ = true;
  return group_;
}

}  // namespace ddprun::launcher
