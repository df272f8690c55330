// The chaos test: a three-host `train` job (one worker per host) under a
// seeded sequence of losses: workers, agents, the rendezvous (an external
// ddprund, or the agent that hosts it) SIGKILLed, and links cut for 1 to 6 s,
// on either side of the keep-alive bound (3 s). Every lost agent or daemon is
// started again on its host after a short while, as a cluster's scheduler
// would, so the job must finish with the epochs of an uninterrupted run.
// Whatever happens, at the end: no agent still runs, no agent exited 0 unless
// the job finished, every agent that failed said why, the snapshot was never
// torn, and nothing is left running on any host.
//
// DDPRUN_CHAOS_SEED=N replays (or explores) another sequence; each step is
// printed, so a failure can be replayed from the log.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <random>
#include <sstream>
#include <thread>

#include "ddprun/test_support/proc_status.hpp"
#include "netns_train_fixture.hpp"

namespace ddprun::netns_test {
namespace {

// One agent process: a host's agents are "<host>.0", "<host>.1", ...
struct Incarnation {
  std::string name;
  std::string host;
  std::optional<Subprocess> process;
  bool killed = false;  // by the chaos, not by its own choice
  std::optional<ExitStatus> status;
};

class NetnsChaosTest : public NetnsTrainTest {
 protected:
  static constexpr int kEpochs = 120;
  const std::vector<std::string> hosts_ = {"h1", "h2", "h3"};

  // The seed from DDPRUN_CHAOS_SEED, else `fallback`; printed either way.
  void seed(unsigned fallback) {
    const char* given = std::getenv("DDPRUN_CHAOS_SEED");
    const unsigned value = given != nullptr && *given != '\0' ? std::stoul(given) : fallback;
    std::cout << "[ chaos    ] seed " << value << std::endl;
    rng_.seed(value);
  }

  int pick(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }
  std::string anyHost() { return hosts_[static_cast<std::size_t>(pick(0, 2))]; }
  void step(const std::string& what) { std::cout << "[ chaos    ] " << what << std::endl; }

  // The chaos's own schedule: how long a host stays cut off, or dead, or
  // quiet before the next blow. Nothing is being waited for here.
  void pause(int millis) { std::this_thread::sleep_for(std::chrono::milliseconds(millis)); }

  // A new agent on `host`: the job's line, against `endpoint_`.
  void startAgent(const std::string& host) {
    int count = 0;
    for (const Incarnation& agent : agents_) {
      count += agent.host == host ? 1 : 0;
    }
    Incarnation& agent = agents_.emplace_back();
    agent.name = host + "." + std::to_string(count);
    agent.host = host;
    std::vector<std::string> args = {
        "--nnodes=2:3",
        "--nproc-per-node=1",
        "--max-restarts=30",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=" + endpoint_,
        "--rdzv-id=chaos",
        "--rdzv-conf=join_timeout=30,last_call_timeout=1,keep_alive_interval=1,"
        "keep_alive_max_attempt=3",
        "--log-dir=" + (dirOf(agent.name) / "logs").string(),
        "--no-python"};
    const std::vector<std::string> program = train(kEpochs, {"--samples", "6000"});
    args.insert(args.end(), program.begin(), program.end());
    agent.process.emplace(ddprunOn(agent.name, host, args));
  }

  // The newest agent on `host`, if it still runs.
  Incarnation* running(const std::string& host) {
    for (auto it = agents_.rbegin(); it != agents_.rend(); ++it) {
      if (it->host == host) {
        if (!it->status) {
          it->status = it->process->tryWait();
        }
        return it->status ? nullptr : &*it;
      }
    }
    return nullptr;
  }

  std::vector<pid_t> pidsOn(const std::string& host) const {
    std::vector<pid_t> pids;
    std::istringstream listed(
        runCommand({ipBinary(), "netns", "pids", lab_->namespaceOf(host)}).output);
    for (pid_t pid = 0; listed >> pid;) {
      pids.push_back(pid);
    }
    return pids;
  }

  std::vector<pid_t> trainersOn(const std::string& host) const {
    std::vector<pid_t> pids;
    for (pid_t pid : pidsOn(host)) {
      if (readFile("/proc/" + std::to_string(pid) + "/comm") == "train\n") {
        pids.push_back(pid);
      }
    }
    return pids;
  }

  // What is still running on `host`: per process its pid, command line and
  // state line, and where each of its threads waits in the kernel (wchan), so
  // a process that did not die says what it was stuck in.
  std::string leftoversOn(const std::string& host) const {
    std::string text;
    for (pid_t pid : pidsOn(host)) {
      const std::string proc = "/proc/" + std::to_string(pid);
      std::string cmdline = readFile(proc + "/cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      text += "  " + std::to_string(pid) + " " + cmdline + "\n    " + stateLine(proc) + "\n";
      std::error_code ignored;
      for (const auto& task : fs::directory_iterator(proc + "/task", ignored)) {
        text += "    thread " + task.path().filename().string() + " " +
                readFile(task.path() / "comm").substr(0, 15) + " waits in " +
                readFile(task.path() / "wchan") + "\n";
      }
    }
    return text;
  }

  // "State: ... SigPnd: ... ShdPnd: ..." from /proc/<pid>/status.
  static std::string stateLine(const std::string& proc) {
    std::istringstream status(readFile(proc + "/status"));
    std::string text;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("State:", 0) == 0 || line.rfind("SigPnd:", 0) == 0 ||
          line.rfind("ShdPnd:", 0) == 0) {
        text += (text.empty() ? "" : "  ") + line;
      }
    }
    return text.empty() ? "(gone)" : text;
  }

  bool emptyWithin(const std::string& host, std::chrono::seconds bound) const {
    return test_support::eventually([&] { return pidsOn(host).empty(); }, bound, 20ms);
  }

  // SIGKILLs one of `host`'s workers.
  void killWorker(const std::string& host) {
    const std::vector<pid_t> pids = trainersOn(host);
    step("SIGKILL a worker on " + host + (pids.empty() ? " (none runs)" : ""));
    if (!pids.empty()) {
      ::kill(pids.front(), SIGKILL);
    }
  }

  // SIGKILLs `host`'s agent, through ddprun's pid (its guardian) or its agent
  // process, at random; everything it ran must die with it before it is
  // started again.
  void killAgent(const std::string& host, const std::string& role) {
    Incarnation* agent = running(host);
    const bool inner = pick(0, 1) == 1;
    step("SIGKILL the " + role + " on " + host +
         (agent == nullptr ? " (none runs)"
          : inner          ? " (its agent process)"
                           : " (ddprun's pid)"));
    if (agent == nullptr) {
      return;
    }
    const pid_t ddprun = agent->process->pid();
    ::kill(inner ? test_support::ddprunAgentOf(ddprun) : ddprun, SIGKILL);
    agent->killed = true;
    agent->status = agent->process->wait();
    EXPECT_TRUE(emptyWithin(host, 10s)) << "left running on " << host << " by the killed agent:\n"
                                        << leftoversOn(host) << "\n===== its log =====\n"
                                        << log(agent->name);
    pause(pick(200, 3000));
    startAgent(host);
  }

  // SIGKILLs the external ddprund and starts it again on its port.
  void killDaemon() {
    step("SIGKILL ddprund on h0");
    const std::string port = std::to_string(daemon_->port());
    ::kill(daemon_->pid(), SIGKILL);
    daemon_->stop();
    daemon_logs_ += daemon_->stderrText();
    daemon_.reset();
    pause(pick(200, 3000));
    daemon_.emplace(ipBinary(), std::vector<std::string>{"netns", "exec", lab_->namespaceOf("h0"),
                                                         DDPRUND_BINARY, "--host",
                                                         lab_->address("h0"), "--port", port});
  }

  void cutLink(const std::string& host) {
    const int millis = pick(1000, 6000);
    step("cut " + host + "'s link for " + std::to_string(millis) + " ms");
    lab_->setLink(host, false);
    pause(millis);
    lab_->setLink(host, true);
  }

  // The snapshot, if there is one yet, is whole; its epochs are printed.
  void expectSnapshotWhole(const std::string& when) {
    if (!fs::exists(snapshot())) {
      return;
    }
    const CommandResult inspected = runCommand({TRAIN_BINARY, "--inspect-snapshot", snapshot()});
    EXPECT_EQ(inspected.code, 0) << "the snapshot is torn " << when << ": " << inspected.output;
    step("  the snapshot holds " + std::to_string(snapshotEpochs()) + " epochs");
  }

  // An agent ended by itself: the job is over, for better or worse.
  bool jobOver() {
    for (const std::string& host : hosts_) {
      running(host);
    }
    for (const Incarnation& agent : agents_) {
      if (agent.status && !agent.killed) {
        return true;
      }
    }
    return false;
  }

  // Runs `blow` DDPRUN_CHAOS_EVENTS (default 8) times, 0.5 to 4 s apart,
  // once the job trains, and until it is over.
  void unleash(const std::function<void()>& blow) {
    ASSERT_TRUE(test_support::eventually([&] { return fs::exists(snapshot()); }, 120s, 20ms))
        << allLogs();
    const char* given = std::getenv("DDPRUN_CHAOS_EVENTS");
    const int events = given != nullptr && *given != '\0' ? std::stoi(given) : 8;
    for (int event = 0; event < events; ++event) {
      pause(pick(500, 4000));
      if (jobOver()) {
        step("the job ended before step " + std::to_string(event));
        break;
      }
      blow();
      expectSnapshotWhole("after step " + std::to_string(event));
    }
    step("the chaos is over");
  }

  // Waits for every agent, then checks what the job's end promises.
  void expectAnHonestEnd() {
    bool ended = true;
    for (Incarnation& agent : agents_) {
      if (!agent.status) {
        agent.status = agent.process->waitFor(240s);
        ended = ended && agent.status.has_value();
      }
    }
    ASSERT_TRUE(ended) << "an agent still runs 240 s after the chaos" << allLogs();
    const bool finished = snapshotEpochs() == kEpochs;
    bool some_success = false;
    for (const Incarnation& agent : agents_) {
      std::cout << "[ chaos    ] agent " << agent.name << ": "
                << (agent.killed ? "killed by the chaos" : agent.status->describe()) << std::endl;
      if (agent.killed) {
        continue;
      }
      some_success = some_success || agent.status->success();
      EXPECT_TRUE(finished || !agent.status->success())
          << agent.name << " exited 0 for a job that did not finish" << allLogs();
      const std::string text = log(agent.name);
      EXPECT_TRUE(agent.status->success() || contains(text, "ddprun: ") ||
                  contains(text, "] [error] ") || contains(text, " FAILED"))
          << agent.name << " failed without saying why:\n"
          << text;
    }
    EXPECT_TRUE(finished && some_success)
        << "the job did not finish: " << snapshotEpochs() << " epochs of " << kEpochs << allLogs();
    expectSnapshotWhole("at the end");
    if (daemon_) {
      daemon_logs_ += daemon_->stderrText();
      daemon_->stop();
    }
    for (const std::string& host : lab_hosts_) {
      EXPECT_TRUE(emptyWithin(host, 10s)) << "left running on " << host << ":\n"
                                          << leftoversOn(host);
    }
  }

  std::string allLogs() const {
    std::string text;
    for (const Incarnation& agent : agents_) {
      text += "\n===== agent " + agent.name + " =====\n" + log(agent.name);
    }
    return text + "\n===== ddprund =====\n" + daemon_logs_ + (daemon_ ? daemon_->stderrText() : "");
  }

  std::mt19937 rng_;
  std::deque<Incarnation> agents_;
  std::string endpoint_;
  std::string daemon_logs_;
  std::vector<std::string> lab_hosts_;
};

// ddprund on h0 serves the rendezvous; its loss must not stop the workers.
TEST_F(NetnsChaosTest, AJobWithAnExternalDaemon) {
  seed(1);
  buildLab(3);
  lab_hosts_ = {"h0", "h1", "h2", "h3"};
  endpoint_ = endpoint();
  for (const std::string& host : hosts_) {
    startAgent(host);
  }
  unleash([&] {
    switch (pick(0, 3)) {
      case 0:
        return killWorker(anyHost());
      case 1:
        return killAgent(anyHost(), "agent");
      case 2:
        return killDaemon();
      default:
        return cutLink(pick(0, 3) == 0 ? "h0" : anyHost());
    }
  });
  expectAnHonestEnd();
}

// The agent on h1 hosts the rendezvous (the mission's c10d line); losing it
// stops every worker until it is back.
TEST_F(NetnsChaosTest, AJobWhoseAgentHostsTheRendezvous) {
  seed(2);
  buildLab(3, /*with_daemon=*/false);
  lab_hosts_ = hosts_;
  endpoint_ = "h1:29603";
  for (const std::string& host : hosts_) {
    startAgent(host);
  }
  unleash([&] {
    switch (pick(0, 3)) {
      case 0:
        return killWorker(anyHost());
      case 1:
        return killAgent(pick(0, 1) == 0 ? "h2" : "h3", "agent");
      case 2:
        return killAgent("h1", "rendezvous host");
      default:
        return cutLink(anyHost());
    }
  });
  expectAnHonestEnd();
}

}  // namespace
}  // namespace ddprun::netns_test
