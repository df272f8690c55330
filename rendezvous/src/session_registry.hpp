// The live sessions of one server, by client id; the ClientSink through which
// the store reaches clients other than the requester. Every call happens with
// the server's store lock held, from any session thread.
#pragma once

#include <unordered_map>
#include <vector>

#include "session.hpp"

namespace ddprun::rdzv {

class SessionRegistry : public ClientSink {
 public:
  void add(const SessionPtr& session) { sessions_.emplace(session->id(), session); }
  void remove(ClientId id) { sessions_.erase(id); }
  std::size_t size() const { return sessions_.size(); }

  std::vector<SessionPtr> snapshot() const {
    std::vector<SessionPtr> all;
    all.reserve(sessions_.size());
    for (const auto& entry : sessions_) {
      all.push_back(entry.second);
    }
    return all;
  }

  // Whether `client`'s peer closed its connection (Session::peerHungUp).
  bool hungUp(ClientId client) const {
    const auto it = sessions_.find(client);
    return it != sessions_.end() && it->second->peerHungUp();
  }

  void deliver(ClientId client, std::string_view bytes) override {
    if (auto it = sessions_.find(client); it != sessions_.end()) {
      it->second->deliver(bytes);
    }
  }

 private:
  std::unordered_map<ClientId, SessionPtr> sessions_;
};

}  // namespace ddprun::rdzv
