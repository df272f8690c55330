#include "ddprun/rendezvous/rendezvous_service.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ddprun::rdzv {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxRunIdBytes = 256;

// "ddprun/rdzv/<run>/<verb>" -> {run, verb}; nullopt when malformed.
std::optional<std::pair<std::string, std::string>> splitKey(std::string_view key) {
  key.remove_prefix(RendezvousService::kPrefix.size());
  const std::size_t slash = key.find('/');
  if (slash == 0 || slash == std::string_view::npos || slash > kMaxRunIdBytes) {
    return std::nullopt;
  }
  return std::make_pair(std::string(key.substr(0, slash)), std::string(key.substr(slash + 1)));
}

ElasticSettings settingsFrom(const json& request) {
  ElasticSettings settings;
  settings.min_nodes = request.at("min_nodes").get<int>();
  settings.max_nodes = request.at("max_nodes").get<int>();
  settings.last_call_timeout =
      std::chrono::milliseconds(request.at("last_call_timeout_ms").get<int64_t>());
  settings.keep_alive_timeout =
      std::chrono::milliseconds(request.at("keep_alive_timeout_ms").get<int64_t>());
  return settings;
}

bool sameShape(const ElasticSettings& a, const ElasticSettings& b) {
  return a.min_nodes == b.min_nodes && a.max_nodes == b.max_nodes;
}

std::string roundEvent(const RoundCompleted& round, const NodeAssignment& node) {
  return json{{"type", "round"},
              {"round", round.round},
              {"group_rank", node.group_rank},
              {"group_world_size", round.nodes.size()},
              {"base_rank", node.base_rank},
              {"local_world_size", node.local_world_size},
              {"world_size", round.world_size}}
      .dump();
}

std::string simpleEvent(std::string_view type, int64_t round = -1) {
  json event{{"type", type}};
  if (round >= 0) {
    event["round"] = round;
  }
  return event.dump();
}

}  // namespace

std::string RendezvousService::eventKey(std::string_view run_id, std::string_view agent,
                                        int64_t n) {
  return std::string(kPrefix) + std::string(run_id) + "/events/" + std::string(agent) + "/" +
         std::to_string(n);
}

std::optional<std::string> RendezvousService::onSet(ClientId client, std::string_view key,
                                                    std::string_view value, Clock::time_point now,
                                                    KeySpace& keys) {
  const auto parts = splitKey(key);
  if (!parts) {
    return "a malformed rendezvous key '" + std::string(key) + "'";
  }
  const auto& [run_id, verb] = *parts;
  if (verb == "join") {
    return join(client, run_id, value, now, keys);
  }
  auto it = runs_.find(run_id);
  if (it == runs_.end()) {
    return "'" + verb + "' for rendezvous '" + run_id + "', which nobody joined";
  }
  Run& run = it->second;
  const std::string agent(value);
  if (verb == "heartbeat") {
    run.rdzv.heartbeat(agent, now);
  } else if (verb == "restart") {
    publish(run_id, run, run.rdzv.restart(agent, now), keys);
  } else if (verb == "leave") {
    bindings_.erase(client);
    publish(run_id, run, run.rdzv.lose(agent, now), keys);
    tell(run_id, run, agent, simpleEvent("left"), keys);  // its event reader can stop
  } else if (verb == "close") {
    publish(run_id, run, run.rdzv.close(), keys);
  } else if (verb == "done") {
    finishMember(run_id, run, agent, keys);
  } else if (verb == "abort") {
    run.aborted_by = agent;  // the closed events say the job failed, and where
    publish(run_id, run, run.rdzv.close(), keys);
  } else {
    return "an unknown rendezvous request '" + verb + "'";
  }
  return std::nullopt;
}

std::optional<std::string> RendezvousService::join(ClientId client, const std::string& run_id,
                                                   std::string_view payload, Clock::time_point now,
                                                   KeySpace& keys) {
  const json request = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  AgentInfo agent;
  ElasticSettings settings;
  try {
    agent.id = request.at("agent").get<std::string>();
    agent.local_world_size = request.at("local_world_size").get<int>();
    if (request.contains("node_rank")) {
      agent.rank_hint = request.at("node_rank").get<int>();
    }
    settings = settingsFrom(request);
  } catch (const json::exception& error) {
    return "a bad rendezvous join: " + std::string(error.what());
  }
  if (agent.id.empty() || agent.id.find('/') != std::string::npos || settings.min_nodes < 1 ||
      settings.max_nodes < settings.min_nodes || agent.local_world_size < 1) {
    return "a bad rendezvous join (empty agent id or one with '/', or bad node counts)";
  }
  auto [it, created] = runs_.try_emplace(run_id, settings);
  Run& run = it->second;
  if (!sameShape(run.settings, settings)) {
    tell(run_id, run, agent.id,
         json{{"type", "error"},
              {"message", "rendezvous '" + run_id +
                              "' runs with --nnodes=" + std::to_string(run.settings.min_nodes) +
                              ":" + std::to_string(run.settings.max_nodes) +
                              ", this agent asked for " + std::to_string(settings.min_nodes) + ":" +
                              std::to_string(settings.max_nodes)}}
             .dump(),
         keys);
    return std::nullopt;
  }
  Events events;
  const JoinStatus status = run.rdzv.join(agent, now, events);
  if (status == JoinStatus::kClosed) {
    tell(run_id, run, agent.id, simpleEvent("closed"), keys);
    return std::nullopt;
  }
  bindings_[client] = {run_id, agent.id};
  if (status == JoinStatus::kSpare) {
    tell(run_id, run, agent.id, simpleEvent("spare"), keys);
  }
  publish(run_id, run, events, keys);
  return std::nullopt;
}

// The exit barrier, pushed: when every member of the running round has
// reported its workers done, each is told "finished". A newer round resets it.
void RendezvousService::finishMember(const std::string& run_id, Run& run, const std::string& agent,
                                     KeySpace& keys) {
  const auto members = run.rdzv.members();
  if (!run.rdzv.complete() || std::find(members.begin(), members.end(), agent) == members.end()) {
    return;
  }
  if (run.done_round != run.rdzv.round()) {
    run.done_round = run.rdzv.round();
    run.done.clear();
  }
  run.done.insert(agent);
  if (run.done.size() == members.size()) {
    for (const std::string& member : members) {
      tell(run_id, run, member, simpleEvent("finished", run.done_round), keys);
    }
  }
}

bool RendezvousService::onDisconnect(ClientId client, Clock::time_point now, KeySpace& keys) {
  const auto binding = bindings_.find(client);
  if (binding == bindings_.end()) {
    return false;
  }
  const Binding lost = binding->second;
  bindings_.erase(binding);
  if (auto run = runs_.find(lost.run_id); run != runs_.end()) {
    publish(lost.run_id, run->second, run->second.rdzv.lose(lost.agent, now), keys);
  }
  return true;
}

// Expired agents are told too: a host whose link comes back must learn it
// was dropped, or its agent and workers would run on alone.
void RendezvousService::tick(Clock::time_point now, KeySpace& keys) {
  for (auto& [run_id, run] : runs_) {
    std::vector<std::string> before = run.rdzv.members();
    const std::vector<std::string> spares = run.rdzv.spares();
    before.insert(before.end(), spares.begin(), spares.end());
    publish(run_id, run, run.rdzv.tick(now), keys);
    for (const std::string& agent : before) {
      if (!run.rdzv.knows(agent)) {
        tell(run_id, run, agent, simpleEvent("dropped"), keys);
      }
    }
  }
}

std::optional<RendezvousService::Clock::time_point> RendezvousService::nextDeadline() const {
  std::optional<Clock::time_point> earliest;
  for (const auto& [run_id, run] : runs_) {
    const auto deadline = run.rdzv.nextDeadline();
    if (deadline && (!earliest || *deadline < *earliest)) {
      earliest = deadline;
    }
  }
  return earliest;
}

void RendezvousService::publish(const std::string& run_id, Run& run, const Events& events,
                                KeySpace& keys) {
  for (const RendezvousEvent& event : events) {
    if (const auto* round = std::get_if<RoundCompleted>(&event)) {
      for (const NodeAssignment& node : round->nodes) {
        tell(run_id, run, node.id, roundEvent(*round, node), keys);
      }
    } else if (const auto* suspended = std::get_if<RoundSuspended>(&event)) {
      for (const std::string& agent : suspended->waiting) {
        tell(run_id, run, agent, simpleEvent("suspended", suspended->round), keys);
      }
    } else if (const auto* closed = std::get_if<RendezvousClosed>(&event)) {
      json notice{{"type", "closed"}};
      if (!run.aborted_by.empty()) {
        notice["failed_on"] = run.aborted_by;
      }
      for (const std::string& agent : closed->agents) {
        tell(run_id, run, agent, notice.dump(), keys);
      }
    }
  }
}

void RendezvousService::tell(const std::string& run_id, Run& run, const std::string& agent,
                             const std::string& event_json, KeySpace& keys) {
  int64_t& next = run.next_event[agent];
  keys.publish(eventKey(run_id, agent, next), event_json);
  ++next;
}

}  // namespace ddprun::rdzv
