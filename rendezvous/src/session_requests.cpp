// Who answers one request of a Session (see session.cpp for the flow): the
// rendezvous for its reserved keys and questions, the key space for the
// rest. Runs on the session's thread with the store lock held.
#include <algorithm>

#include "log.hpp"
#include "session.hpp"
#include "session_registry.hpp"

namespace ddprun::rdzv {
namespace {

// Whether a request other than SET would write a reserved rendezvous key.
bool writesRendezvousKey(const proto::Request& request) {
  switch (request.command) {
    case proto::Command::CompareSet:
    case proto::Command::Add:
    case proto::Command::DeleteKey:
    case proto::Command::Append:
    case proto::Command::MultiSet:
    case proto::Command::QueuePush:
    case proto::Command::QueuePop:
      return std::any_of(request.keys.begin(), request.keys.end(), [](const auto& key) {
        return RendezvousService::isRendezvousKey(key) || RendezvousService::isQueryKey(key);
      });
    case proto::Command::Set:
      return RendezvousService::isQueryKey(request.keys.front());
    default:
      return false;
  }
}

}  // namespace

// Runs one request; a throw from it (a defect, or memory exhausted) fails
// only this request's connection, never the thread every client shares.
// A throw may come after part of the request took effect; the client loses
// its connection and sees the request unanswered, as if the daemon had died
// for it alone.
std::optional<std::string> Session::executeRequestCaught() {
  try {
    return executeRequest();
  } catch (const std::exception& error) {
    return std::string("made the daemon fail: ") + error.what();
  }
}

// A SET of a reserved rendezvous key goes to the rendezvous service, not the
// store; no other command may write one (a forged event, a deleted one). A
// GET of a query key is answered by the service; nothing may write one.
// Everything else is a store command. Store lock held.
std::optional<std::string> Session::executeRequest() {
  if (writesRendezvousKey(request_)) {
    return "a " + std::string(proto::commandName(request_.command)) +
           " of a reserved rendezvous key (only the rendezvous writes them)";
  }
  // Before the service answers: a legacy client's stale WAIT must not
  // later complete into the reply stream of this request.
  key_space_.cancelLegacyWaitBefore(id_, decoder_.dialect(), request_.command);
  if (request_.command == proto::Command::Get &&
      RendezvousService::isQueryKey(request_.keys.front())) {
    loseHungUpAgents();
    proto::WireWriter(scratch_).bytes(
        context_.rendezvous.answer(request_.keys.front(), RendezvousService::Clock::now()));
    return std::nullopt;
  }
  if (request_.command == proto::Command::Get &&
      RendezvousService::isRendezvousKey(request_.keys.front())) {
    if (const auto answer = context_.rendezvous.reply(id_, request_.keys.front())) {
      proto::WireWriter(scratch_).bytes(*answer);  // this connection's alone: never stored
      return std::nullopt;
    }
  }
  if (request_.command == proto::Command::Set &&
      RendezvousService::isRendezvousKey(request_.keys.front())) {
    return setRendezvousKey();
  }
  return key_space_.execute(id_, decoder_.dialect(), request_, scratch_);
}

// RendezvousService::loseHungUpAgents for this request's key. Store lock held.
void Session::loseHungUpAgents() {
  const auto hung_up = [this](ClientId client) { return context_.registry.hungUp(client); };
  if (context_.rendezvous.loseHungUpAgents(request_.keys.front(), hung_up,
                                           RendezvousService::Clock::now(), key_space_)) {
    context_.rendezvous_changed();
  }
}

// A refused join stays open to read why (RendezvousService::reply); every
// other refusal closes the connection. Store lock held.
std::optional<std::string> Session::setRendezvousKey() {
  loseHungUpAgents();
  auto refusal = context_.rendezvous.onSet(id_, request_.keys.front(), request_.values.front(),
                                           RendezvousService::Clock::now(), key_space_);
  context_.rendezvous_changed();
  if (!refusal) {
    return std::nullopt;
  }
  if (refusal->close) {
    return std::move(refusal->why);
  }
  rdzvLog().warn("store client {} ({}) sent {}; refused, and told why on its own connection", peer_,
                 proto::dialectName(decoder_.dialect()), refusal->why);
  return std::nullopt;
}

}  // namespace ddprun::rdzv
