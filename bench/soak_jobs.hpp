// The jobs of ddprund_soak: one after another against one ddprund, each a
// fresh AgentSwarm of 2 to 8 simulated agents through the real protocol
// (agent_swarm.hpp): every agent joins, the first round forms; some jobs
// then restart (an agent's restart request: a new round for every member),
// some lose an agent (both its connections closed: the survivors get a new
// round); every member left reports done, hears finished, closes the job
// and exits. The agents acknowledge the events they read, as ddprun's agent
// does. Between jobs the caller scrapes the metrics and asks the status
// questions (SoakProbe).
//
// Runs on the calling thread; errors (a phase past its deadline, ddprund
// gone, an event no agent should get) throw std::runtime_error with one line.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ddprun::bench {

// What one job of the soak does; the mix is fixed by its index, so every
// run of the soak runs the same jobs.
struct SoakJob {
  std::string run_id;
  int agents = 2;
  bool restart = false;     // an agent asks for a restart after the first round
  bool lose_agent = false;  // the last agent dies after the rounds so far
};

SoakJob soakJob(std::size_t index);

struct SoakTarget {
  std::uint16_t port = 0;
  std::function<std::string()> daemon_ended;  // "" while ddprund runs
  std::chrono::milliseconds job_timeout{60'000};
};

// Runs the job to its end: every agent still alive told closed.
void runSoakJob(const SoakJob& job, const SoakTarget& target);

// What ddprund holds, read through its own interfaces only: the keys and
// the jobs from a scrape of its metrics (ddprund_keys, ddprund_jobs).
struct DaemonHolding {
  std::int64_t keys = 0;
  std::int64_t runs = 0;
};

// Asks one ddprund what it holds, as an operator's tools do: a scrape of
// its metrics, and the status questions `ddprun status` asks. A value, used
// by the soak's thread.
class SoakProbe {
 public:
  SoakProbe(std::uint16_t store_port, std::uint16_t metrics_port)
      : store_port_(store_port), metrics_port_(metrics_port) {}
  // One scrape, and the `jobs` and `status/<run_id>` questions (run_id ""
  // asks no status).
  DaemonHolding probe(const std::string& run_id) const;

 private:
  std::uint16_t store_port_;
  std::uint16_t metrics_port_;
};

}  // namespace ddprun::bench
