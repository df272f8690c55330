// ddprun's main in an elastic job (--rdzv-backend=c10d across nodes): hosts
// the rendezvous daemon when this agent is the endpoint (or is_host=1), joins
// it, and turns its rounds into the Agent's attempts. Owned and called by
// main's thread; the membership's own threads report through the hooks.
#pragma once

#include <netdb.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "ddprun/launcher/agent.hpp"
#include "ddprun/launcher/elastic_membership.hpp"
#include "ddprun/launcher/launch_config.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {

inline std::chrono::milliseconds confSeconds(const LaunchConfig& config, const std::string& key,
                                             int default_seconds) {
  const auto it = config.rdzv_conf.find(key);
  if (it == config.rdzv_conf.end()) {
    return std::chrono::seconds(default_seconds);
  }
  try {
    return std::chrono::milliseconds(static_cast<int64_t>(std::stod(it->second) * 1000));
  } catch (const std::exception&) {
    throw ConfigError("--rdzv-conf " + key + "=" + it->second + ": not a number of seconds");
  }
}

inline int confInt(const LaunchConfig& config, const std::string& key, int default_value) {
  const auto it = config.rdzv_conf.find(key);
  if (it == config.rdzv_conf.end()) {
    return default_value;
  }
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    throw ConfigError("--rdzv-conf " + key + "=" + it->second + ": not an integer");
  }
}

// torchrun's LaunchConfig adds timeout=900 to every rdzv_conf. For c10d an
// explicit join_timeout wins, then a timeout other than that default, then
// torchrun's join_timeout default, 600 s.
inline std::chrono::milliseconds joinTimeout(const LaunchConfig& config) {
  if (config.rdzv_conf.count("join_timeout")) {
    return confSeconds(config, "join_timeout", 600);
  }
  const auto timeout = config.rdzv_conf.find("timeout");
  if (timeout != config.rdzv_conf.end() && timeout->second != "900") {
    return confSeconds(config, "timeout", 600);
  }
  return std::chrono::seconds(600);
}

// is_host as torchrun reads it: 1/true/t/yes/y or 0/false/f/no/n; unset: nullopt.
inline std::optional<bool> confIsHost(const LaunchConfig& config) {
  const auto it = config.rdzv_conf.find("is_host");
  if (it == config.rdzv_conf.end()) {
    return std::nullopt;
  }
  for (const char* yes : {"1", "true", "t", "yes", "y"}) {
    if (it->second == yes) {
      return true;
    }
  }
  for (const char* no : {"0", "false", "f", "no", "n"}) {
    if (it->second == no) {
      return false;
    }
  }
  throw ConfigError("--rdzv-conf is_host=" + it->second + ": not a boolean");
}

// The endpoint's first IP address, for binding the daemon to it.
inline std::string resolveHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &results) != 0 || results == nullptr) {
    throw ConfigError("--rdzv-endpoint host '" + host + "' does not resolve");
  }
  char text[NI_MAXHOST] = {};
  getnameinfo(results->ai_addr, results->ai_addrlen, text, sizeof(text), nullptr, 0,
              NI_NUMERICHOST);
  freeaddrinfo(results);
  return text;
}

class ElasticNode {
 public:
  ElasticNode(const LaunchConfig& config, int nproc, const std::string& hostname) {
    const Endpoint& endpoint = *config.rdzv_address;
    hostRendezvousIfHere(config, endpoint);
    ElasticOptions options;
    options.host = endpoint.host;
    options.port = static_cast<std::uint16_t>(endpoint.port);
    options.run_id = config.rdzv_id;
    options.agent_id = hostname + ":" + std::to_string(::getpid());
    options.local_world_size = nproc;
    options.node_rank_hint = config.node_rank;  // ties (all 0) keep arrival order
    options.min_nodes = config.min_nodes;
    options.max_nodes = config.max_nodes;
    options.join_timeout = joinTimeout(config);
    options.last_call_timeout = confSeconds(config, "last_call_timeout", 30);
    options.keep_alive_interval = confSeconds(config, "keep_alive_interval", 5);
    options.keep_alive_max_attempt = confInt(config, "keep_alive_max_attempt", 3);
    if (config.local_addr) {
      options.local_addr = *config.local_addr;
    }
    membership_ = std::make_unique<ElasticMembership>(options);
  }

  bool hostsRendezvous() const { return daemon_ != nullptr; }

  ElasticHooks hooks(const proto::WorkerEnv& base, int nproc) {
    ElasticHooks hooks;
    hooks.next_round = [this, base, nproc]() -> std::optional<AttemptGroup> {
      const auto round = membership_->nextRound();
      if (!round) {
        return std::nullopt;
      }
      const auto [store_host, store_port] = membership_->workerStore(*round);
      AttemptGroup next{base, static_cast<int>(round->round), round->base_rank};
      next.group.group_rank = round->group_rank;
      next.group.group_world_size = round->group_world_size;
      next.group.world_size = round->world_size;
      next.group.role_world_size = round->world_size;
      next.group.local_world_size = nproc;
      next.group.master_addr = store_host;
      next.group.master_port = store_port;
      next.group.use_agent_store = true;
      return next;
    };
    hooks.on_round_over = [this](std::function<void(std::int64_t)> round_over) {
      membership_->onChange(std::move(round_over));
    };
    hooks.request_restart = [this] { membership_->requestRestart(); };
    hooks.cancel_wait = [this] { membership_->cancelWait(); };
    return hooks;
  }

  // The agent whose failure ended the job elsewhere, if one did.
  std::optional<std::string> failedOn() { return membership_->failedOn(); }
  bool dropped() { return membership_->dropped(); }

  // This node is done. After a success it waits for every node of the round
  // (the exit barrier), then closes the run; if the job moved to a new round
  // meanwhile, it leaves it to the others. After a failure (restarts spent)
  // it aborts the run so every other agent stops too. Returns a warning.
  std::optional<std::string> jobEnded(bool succeeded) {
    using Finish = ElasticMembership::Finish;
    std::optional<std::string> warning;
    try {
      if (!succeeded) {
        membership_->close(/*failed=*/true);
        return warning;
      }
      switch (membership_->finish(std::chrono::seconds(300))) {
        case Finish::kAllDone:
          membership_->close(/*failed=*/false);
          break;
        case Finish::kRoundMoved:
          warning = "the job moved to a new round after this node's workers finished; leaving it";
          break;
        case Finish::kClosed:
          break;
        case Finish::kTimedOut:
          warning = "exit barrier: not every node finished within 300 s";
          membership_->close(/*failed=*/false);
          break;
      }
    } catch (const std::exception& error) {
      warning = std::string("rendezvous at the end of the job: ") + error.what();
    }
    return warning;
  }

 private:
  // The agent whose address is the endpoint embeds the daemon, unless
  // is_host=0; with is_host=1 it must. Binding decides "whose address": the
  // bind fails on another host's address, or when a ddprund already serves it.
  void hostRendezvousIfHere(const LaunchConfig& config, const Endpoint& endpoint) {
    const std::optional<bool> is_host = confIsHost(config);
    if (is_host == false) {
      return;
    }
    rdzv::ServerOptions options;
    options.host = resolveHost(endpoint.host);
    options.port = static_cast<std::uint16_t>(endpoint.port);
    try {
      daemon_ = std::make_unique<rdzv::Server>(options);
      daemon_->start();
    } catch (const Error&) {
      daemon_.reset();
      if (is_host == true) {
        throw;
      }
    }
  }

  std::unique_ptr<rdzv::Server> daemon_;
  std::unique_ptr<ElasticMembership> membership_;
};

}  // namespace ddprun::launcher
