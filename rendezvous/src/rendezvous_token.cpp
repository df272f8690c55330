// The token's part of the rendezvous (ddprund --token-file): a join must
// prove its agent holds the job's token, over a nonce this connection asked
// for. Nonces and refusals are answers to the connection that asked, read
// with a plain GET (reply()) and stored nowhere, so nothing a stranger sends
// is written where an agent reads: a forged challenge or join naming an
// agent leaves that agent's keys as they were.
#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::rdzv {

namespace protocol = proto::rendezvous;

// A nonce for `client`'s next join, answered to its GET of the challenge key
// of its session (reply()) and stored nowhere: a challenge naming another
// agent touches nothing of that agent's.
std::optional<std::string> RendezvousService::challenge(ClientId client, const std::string& run_id,
                                                        std::string_view value) {
  const auto request = protocol::parseChallengeRequest(value);
  if (!request) {
    return "a malformed rendezvous challenge '" + std::string(value) + "'";
  }
  challenges_[client] = {run_id, request->first, request->second, protocol::newNonce()};
  return std::nullopt;
}

// With a token, a join must carry the proof for the nonce this connection
// was given for this run, agent and session; each nonce serves one join.
bool RendezvousService::proven(ClientId client, const std::string& run_id,
                               const protocol::JoinRequest& request) {
  const auto it = challenges_.find(client);
  if (options_.token.empty()) {
    if (it != challenges_.end()) {
      challenges_.erase(it);
    }
    return true;
  }
  const bool valid =
      it != challenges_.end() && it->second.run_id == run_id && it->second.agent == request.agent &&
      it->second.session == request.session &&
      protocol::sameProof(request.auth, protocol::joinProof(options_.token, run_id, request.agent,
                                                            request.session, it->second.nonce));
  if (it != challenges_.end()) {
    challenges_.erase(it);
  }
  return valid;
}

std::optional<std::string> RendezvousService::reply(ClientId client, std::string_view key) const {
  if (const auto it = challenges_.find(client); it != challenges_.end()) {
    const Challenge& asked = it->second;
    if (key == protocol::challengeKey(asked.run_id, asked.agent, asked.session)) {
      return asked.nonce;
    }
  }
  if (const auto it = refused_joins_.find(client); it != refused_joins_.end()) {
    if (key == protocol::verbKey(it->second.run_id, protocol::Verb::kJoin)) {
      return it->second.answer;
    }
  }
  return std::nullopt;
}

}  // namespace ddprun::rdzv
