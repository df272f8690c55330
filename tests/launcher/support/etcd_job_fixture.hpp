// EtcdJobTest: real ddprun agents meeting in a real 3-member etcd cluster
// (test_support::EtcdCluster) on loopback, with short leases (keep-alive 1 s
// x 2: a 2 s TTL) so that a lost agent is noticed within seconds. Builds on
// ElasticTest's agents, logs and fake workers' files; adds the etcd command
// line, which agent coordinates, and how many rounds an agent's workers saw.
// Used by one test thread.
#pragma once

#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/test_support/etcd_cluster.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "ddprun/test_support/text.hpp"
#include "elastic_fixture.hpp"

namespace ddprun::launcher::testing {

using namespace std::chrono_literals;

using test_support::contains;

class EtcdJobTest : public ElasticTest {
 protected:
  static constexpr auto kLeaseTtl = 2s;  // keep_alive_interval 1 x keep_alive_max_attempt 2
  static constexpr const char* kShortLeases =
      "keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1,join_timeout=30";

  test_support::EtcdCluster& cluster() {
    if (!cluster_) {
      cluster_ = std::make_unique<test_support::EtcdCluster>();
    }
    return *cluster_;
  }

  // One agent of the job `run_id_` at `endpoints` (the cluster's when
  // empty): `nproc` workers running `program`, --rdzv-conf `conf`.
  Subprocess etcdAgent(const std::string& name, const std::string& nnodes, int nproc,
                       std::vector<std::string> program, const std::string& conf = kShortLeases,
                       const std::string& endpoints = "",
                       std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> args = {
        "--nnodes",         nnodes,
        "--nproc-per-node", std::to_string(nproc),
        "--rdzv-backend",   "etcd-v3",
        "--rdzv-endpoint",  endpoints.empty() ? cluster().endpoints() : endpoints,
        "--rdzv-id",        run_id_,
        "--rdzv-conf",      conf,
        "--no-python"};
    args.insert(args.end(), program.begin(), program.end());
    return launch(name, std::move(args), std::move(env));
  }

  // An agent of 2 fake workers writing their env and ready files to
  // <tmp>/<name>/, then doing `worker_args`.
  Subprocess fakeAgent(const std::string& name, const std::string& nnodes,
                       std::vector<std::string> worker_args,
                       const std::string& conf = kShortLeases) {
    const std::string dir = (dir_.path() / name).string();
    std::vector<std::string> program = {DDPRUN_FAKE_WORKER, "--env-to", dir, "--ready-to", dir};
    program.insert(program.end(), worker_args.begin(), worker_args.end());
    return etcdAgent(name, nnodes, 2, std::move(program), conf);
  }

  bool logShows(const std::string& name, const std::string& part,
                std::chrono::milliseconds within) {
    return test_support::eventually([&] { return contains(log(name), part); }, within, 10ms);
  }

  // Every named agent's log, for a failed assertion's message.
  std::string logs(const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& name : names) {
      text += "\n=== " + name + " ===\n" + log(name);
    }
    return text + (cluster_ ? "\n=== etcd ===\n" + cluster_->logTail() : "");
  }

  // The agents (among `names`) whose log's last word on it is that they
  // coordinate ("coordinating ...", not "no longer coordinating ...").
  std::vector<std::string> coordinators(const std::vector<std::string>& names) {
    static const std::string kOn = "coordinating the etcd rendezvous";
    static const std::string kOff = "no longer ";
    std::vector<std::string> found;
    for (const std::string& name : names) {
      const std::string text = log(name);
      const auto last = text.rfind(kOn);
      const bool off = last != std::string::npos && last >= kOff.size() &&
                       text.compare(last - kOff.size(), kOff.size(), kOff) == 0;
      if (last != std::string::npos && !off) {
        found.push_back(name);
      }
    }
    return found;
  }

  // SIGKILL of the agent process itself (the one holding its etcd lease),
  // not of the guardian ddprun was started as: a crashed agent.
  void killAgent(Subprocess& ddprun) {
    const pid_t agent = test_support::ddprunAgentOf(ddprun.pid());
    ASSERT_NE(agent, ddprun.pid()) << "no agent process under ddprun " << ddprun.pid();
    ASSERT_EQ(::kill(agent, SIGKILL), 0);
  }

  // The round (TORCHELASTIC_RESTART_COUNT) and WORLD_SIZE local rank 0 of
  // `name` last wrote, or -1s when it wrote none yet.
  std::pair<int, int> roundAndWorld(const std::string& name) {
    const auto vars = env(name, 0);
    const auto round = vars.find("TORCHELASTIC_RESTART_COUNT");
    const auto world = vars.find("WORLD_SIZE");
    if (round == vars.end() || world == vars.end() || round->second.empty() ||
        world->second.empty()) {
      return {-1, -1};
    }
    return {std::stoi(round->second), std::stoi(world->second)};
  }

  std::unique_ptr<test_support::EtcdCluster> cluster_;
  std::string run_id_ = "etcd-job";
};

}  // namespace ddprun::launcher::testing
