// Losing the rendezvous, with real ddprun agents (and ddprund) on loopback:
// the agent that hosts it is SIGKILLed (the others stop their workers at
// once, say so, and re-form when it is back), an external ddprund is killed
// and restarted (the workers train on, the agents reconnect and finish
// through the exit barrier), or never comes back (no agent exits 0), static
// node 0 is lost; and a plain store client cannot steer the job.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/proto/rendezvous_protocol.hpp"
#include "ddprun/proto/rendezvous_status.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/proc_status.hpp"
#include "elastic_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using test_support::readFile;
using testing::alive;
using testing::ElasticTest;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class RendezvousLossTest : public ElasticTest {
 protected:
  bool logShows(const std::string& name, const std::string& part,
                std::chrono::milliseconds within) {
    return test_support::eventually([&] { return contains(log(name), part); }, within, 10ms);
  }

  std::string logs() { return "\n=== a ===\n" + log("a") + "\n=== b ===\n" + log("b"); }

  fs::path go() const { return dir_.path() / "go"; }

  // Stops b's agent (not its guardian), so it cannot hear anything, lets the
  // workers waiting for go() go on, and once a's log shows `line` says
  // whether a is still there a second later; b's agent goes on after that.
  bool hostStaysWhileBIsStopped(Subprocess& a, const Subprocess& b, const std::string& line) {
    const pid_t b_agent = test_support::ddprunAgentOf(b.pid());
    if (::kill(b_agent, SIGSTOP) != 0) {
      ADD_FAILURE() << "could not stop b's agent " << b_agent;
      return false;
    }
    std::ofstream(go()) << "go";
    const bool shown = logShows("a", line, 10s);
    const bool stayed = shown && !a.waitFor(1s);
    ::kill(b_agent, SIGCONT);
    EXPECT_TRUE(shown) << "a's log never showed '" << line << "'" << logs();
    return stayed;
  }

  // A token file only its owner reads, as an agent's token_file should be.
  std::string writeToken(const std::string& name, const std::string& secret) {
    const fs::path path = dir_.path() / name;
    std::ofstream(path) << secret << "\n";
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
    return path.string();
  }
};

// The agent that hosts the rendezvous (a) is SIGKILLed while both nodes'
// workers run: b stops its workers at once and says which host it lost. On
// this host b can bind the endpoint itself, so it hosts the next rendezvous;
// a replacement agent joins, and the job re-forms and finishes.
TEST_F(RendezvousLossTest, LosingTheHostingAgentStopsTheOthersAndTheJobReforms) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  const std::vector<std::string> hang_first = {"--hang", "--only-attempt", "0"};
  Subprocess a = agent("a", "2", port, hang_first);
  ASSERT_TRUE(logShows("a", "hosting the rendezvous", 10s)) << logs();
  Subprocess b = agent("b", "2", port, hang_first);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s)) << logs();
  const std::vector<pid_t> b_workers = workers("b");
  ASSERT_EQ(::kill(a.pid(), SIGKILL), 0);
  EXPECT_TRUE(logShows("b", "lost the rendezvous", 5s)) << logs();
  EXPECT_TRUE(
      test_support::eventually([&] { return !alive(b_workers[0]) && !alive(b_workers[1]); }, 5s))
      << "b's workers still run after the rendezvous host was lost" << logs();
  fs::remove_all(dir_.path() / "a");
  Subprocess replacement = agent("a", "2", port, hang_first);
  const auto b_status = b.waitFor(60s);
  const auto r_status = replacement.waitFor(30s);
  ASSERT_TRUE(b_status && b_status->success()) << logs();
  ASSERT_TRUE(r_status && r_status->success()) << logs();
  EXPECT_GE(std::stoi(env("b", 0)["TORCHELASTIC_RESTART_COUNT"]), 1) << logs();
  EXPECT_EQ(env("b", 0)["WORLD_SIZE"], "4");
}

// The agent that hosts the rendezvous fails the job for good (its workers
// exit 3, no restart left): it stays until the others have heard that the
// job failed. b's agent is stopped meanwhile, so it cannot hear it: a waits
// for it (it used to exit at once, and a b that had not read the news took
// the host for lost and waited join_timeout for it to come back).
TEST_F(RendezvousLossTest, AHostWhoseJobFailsStaysUntilTheOthersHaveHeard) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  Subprocess a = agent("a", "2", port, {"--after", go().string(), "--exit", "3"});
  ASSERT_TRUE(logShows("a", "hosting the rendezvous", 10s)) << logs();
  Subprocess b = agent("b", "2", port, {"--hang"});
  ASSERT_TRUE(test_support::eventually([&] { return ready("b"); }, 30s)) << logs();
  EXPECT_TRUE(hostStaysWhileBIsStopped(a, b, "FAILED"))
      << "a left before b could hear that the job failed" << logs();
  const auto b_status = b.waitFor(30s);
  const auto a_status = a.waitFor(30s);
  ASSERT_TRUE(b_status && a_status) << "an agent still runs" << logs();
  EXPECT_EQ(b_status->shellCode(), 1) << logs();
  EXPECT_EQ(a_status->shellCode(), 3) << logs();
  EXPECT_TRUE(contains(log("b"), "the job failed on")) << logs();
  EXPECT_FALSE(contains(log("b"), "lost the rendezvous")) << logs();
}

// A third node fails the job: the host, told it failed elsewhere, stays too
// until the others have heard (b, stopped meanwhile).
TEST_F(RendezvousLossTest, AHostToldTheJobFailedElsewhereStaysUntilTheOthersHaveHeard) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  Subprocess a = agent("a", "3", port, {"--hang"});
  ASSERT_TRUE(logShows("a", "hosting the rendezvous", 10s)) << logs();
  Subprocess b = agent("b", "3", port, {"--hang"});
  Subprocess c = agent("c", "3", port, {"--after", go().string(), "--exit", "3"});
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s))
      << logs() << log("c");
  EXPECT_TRUE(hostStaysWhileBIsStopped(a, b, "the job failed on"))
      << "a left before b could hear that the job failed" << logs() << log("c");
  const auto b_status = b.waitFor(30s);
  ASSERT_TRUE(b_status) << "b still runs" << logs();
  EXPECT_EQ(b_status->shellCode(), 1) << logs();
  EXPECT_FALSE(contains(log("b"), "lost the rendezvous")) << logs();
  const auto a_status = a.waitFor(30s);
  const auto c_status = c.waitFor(30s);
  ASSERT_TRUE(a_status && c_status) << logs() << log("c");
  EXPECT_EQ(a_status->shellCode(), 1);
  EXPECT_EQ(c_status->shellCode(), 3);
}

// Both nodes' workers fail at once, as when one rank's exit resets its
// peers' connections, and the host may close the job while the other agent
// still asks whether its failure stands: both exit non-zero at once, and
// neither takes the other for lost (b did, in about one run in four, and
// waited join_timeout for a rendezvous that was never coming back).
TEST_F(RendezvousLossTest, WorkersFailingOnEveryNodeAtOnceEndEveryAgentAtOnce) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  Subprocess a = agent("a", "2", port, {"--exit", "1"});
  ASSERT_TRUE(logShows("a", "hosting the rendezvous", 10s)) << logs();
  Subprocess b = agent("b", "2", port, {"--exit", "3"});
  const auto a_status = a.waitFor(30s);
  const auto b_status = b.waitFor(30s);
  ASSERT_TRUE(a_status && b_status) << "an agent still runs" << logs();
  EXPECT_EQ(a_status->shellCode(), 1) << logs();
  EXPECT_NE(b_status->shellCode(), 0) << logs();
  EXPECT_FALSE(contains(log("b"), "lost the rendezvous")) << logs();
}

// No replacement comes: after join_timeout the survivor gives up with one
// line and a non-zero exit status.
TEST_F(RendezvousLossTest, ASurvivorOfALostHostGivesUpAfterJoinTimeout) {
  const std::uint16_t port = test_support::freeLoopbackPort();
  const std::vector<std::string> conf = {"--rdzv-conf", "join_timeout=3"};
  Subprocess a = agent("a", "2", port, {"--hang"}, conf);
  ASSERT_TRUE(logShows("a", "hosting the rendezvous", 10s)) << logs();
  Subprocess b = agent("b", "2", port, {"--hang"}, conf);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s)) << logs();
  ASSERT_EQ(::kill(a.pid(), SIGKILL), 0);
  const auto status = b.waitFor(30s);
  ASSERT_TRUE(status) << "b still runs" << logs();
  EXPECT_EQ(status->shellCode(), 1) << logs();
  EXPECT_TRUE(contains(log("b"), "lost the rendezvous")) << logs();
}

// An external ddprund is SIGKILLed and restarted on its port: the workers
// never stop, the agents reconnect and re-register, and the job ends through
// the exit barrier of the new daemon.
TEST_F(RendezvousLossTest, AnExternalDaemonRestartedOnItsPortLosesNoWork) {
  const std::string port = std::to_string(test_support::freeLoopbackPort());
  auto daemon =
      std::make_unique<test_support::DaemonProcess>(std::vector<std::string>{"--port", port});
  const std::vector<std::string> conf = {"--rdzv-conf", "is_host=0"};
  const std::vector<std::string> wait_for_go = {"--after", go().string()};
  Subprocess a = agent("a", "2", daemon->port(), wait_for_go, conf);
  Subprocess b = agent("b", "2", daemon->port(), wait_for_go, conf);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s)) << logs();
  const std::vector<pid_t> before = workers("a");
  ASSERT_EQ(::kill(daemon->pid(), SIGKILL), 0);
  daemon->stop();
  EXPECT_TRUE(logShows("a", "lost the rendezvous", 5s)) << logs();
  EXPECT_TRUE(logShows("b", "lost the rendezvous", 5s)) << logs();
  daemon = std::make_unique<test_support::DaemonProcess>(std::vector<std::string>{"--port", port});
  EXPECT_TRUE(logShows("a", "reconnected", 10s)) << logs();
  EXPECT_TRUE(logShows("b", "reconnected", 10s)) << logs();
  EXPECT_TRUE(alive(before[0]) && alive(before[1])) << "the workers were stopped" << logs();
  std::ofstream(go()) << "go";
  const auto a_status = a.waitFor(30s);
  const auto b_status = b.waitFor(30s);
  ASSERT_TRUE(a_status && a_status->success()) << logs() << daemon->stderrText();
  ASSERT_TRUE(b_status && b_status->success()) << logs() << daemon->stderrText();
  EXPECT_EQ(workers("a"), before) << "the workers were restarted";
  EXPECT_EQ(env("a", 0)["TORCHELASTIC_RESTART_COUNT"], "0");
}

// The daemon never comes back: the workers succeed, but no agent can know
// that every node did, so none exits 0.
TEST_F(RendezvousLossTest, WithoutTheRendezvousNoAgentReportsSuccess) {
  auto daemon = std::make_unique<test_support::DaemonProcess>();
  const std::vector<std::string> conf = {"--rdzv-conf", "is_host=0,join_timeout=2"};
  const std::vector<std::string> wait_for_go = {"--after", go().string()};
  Subprocess a = agent("a", "2", daemon->port(), wait_for_go, conf);
  Subprocess b = agent("b", "2", daemon->port(), wait_for_go, conf);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s)) << logs();
  ASSERT_EQ(::kill(daemon->pid(), SIGKILL), 0);
  daemon.reset();
  std::ofstream(go()) << "go";
  for (Subprocess* agent : {&a, &b}) {
    const auto status = agent->waitFor(30s);
    ASSERT_TRUE(status) << logs();
    EXPECT_EQ(status->shellCode(), 1) << logs();
  }
  EXPECT_TRUE(contains(log("a"), "lost the rendezvous")) << logs();
}

// Static: node 0's agent (the store's host) is SIGKILLed. Node 1 stops its
// workers at once and names the lost node; node 0 restarted, the job
// re-forms and finishes.
TEST_F(RendezvousLossTest, LosingStaticNodeZeroStopsTheOthersUntilItIsBack) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  const auto node = [&](const std::string& name, int rank) {
    const std::string dir = (dir_.path() / name).string();
    return launch(name, {"--nnodes", "2", "--node-rank", std::to_string(rank), "--rdzv-endpoint",
                         endpoint, "--nproc-per-node", "2", "--rdzv-conf", "timeout=30",
                         "--no-python", DDPRUN_FAKE_WORKER, "--env-to", dir, "--ready-to", dir,
                         "--hang", "--only-attempt", "0"});
  };
  Subprocess a = node("a", 0);
  Subprocess b = node("b", 1);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s)) << logs();
  const std::vector<pid_t> b_workers = workers("b");
  ASSERT_EQ(::kill(a.pid(), SIGKILL), 0);
  EXPECT_TRUE(logShows("b", "lost node rank 0", 5s)) << logs();
  EXPECT_TRUE(
      test_support::eventually([&] { return !alive(b_workers[0]) && !alive(b_workers[1]); }, 5s))
      << "node 1's workers still run after node 0 was lost" << logs();
  fs::remove_all(dir_.path() / "a");
  Subprocess replacement = node("a", 0);
  const auto b_status = b.waitFor(60s);
  const auto r_status = replacement.waitFor(30s);
  ASSERT_TRUE(b_status && b_status->success()) << logs();
  ASSERT_TRUE(r_status && r_status->success()) << logs();
  EXPECT_GE(std::stoi(env("b", 0)["TORCHELASTIC_RESTART_COUNT"]), 1) << logs();
}

// A plain store client that reaches the daemon cannot abort, close or restart
// a job: only the connection that joined as an agent may speak for it. The
// daemon names the client that tried.
TEST_F(RendezvousLossTest, AForgedAbortFromAPlainClientIsRefused) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> wait_for_go = {"--after", go().string()};
  Subprocess a = agent("a", "2", daemon.port(), wait_for_go, {"--rdzv-conf", "is_host=0"});
  Subprocess b = agent("b", "2", daemon.port(), wait_for_go, {"--rdzv-conf", "is_host=0"});
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s)) << logs();
  namespace protocol = proto::rendezvous;
  for (const auto verb :
       {protocol::Verb::kAbort, protocol::Verb::kClose, protocol::Verb::kRestart}) {
    rdzv::StoreClient mallory("127.0.0.1", daemon.port(), 5s);
    mallory.set(protocol::verbKey("job7", verb), "mallory");
    EXPECT_ANY_THROW(mallory.ping()) << "the daemon served a forged " << protocol::verbName(verb);
  }
  EXPECT_TRUE(test_support::eventually(
      [&] { return contains(daemon.stderrText(), "not an agent of rendezvous 'job7'"); }, 5s))
      << daemon.stderrText();
  std::ofstream(go()) << "go";
  const auto a_status = a.waitFor(30s);
  const auto b_status = b.waitFor(30s);
  ASSERT_TRUE(a_status && a_status->success()) << logs();
  ASSERT_TRUE(b_status && b_status->success()) << logs();
  EXPECT_EQ(env("a", 0)["TORCHELASTIC_RESTART_COUNT"], "0") << logs();
}

// With a token, only agents that hold it join: the proof rides on a nonce,
// so the token never crosses the wire; one without it, or with another, is
// refused with one line saying what it lacks.
TEST_F(RendezvousLossTest, ATokenLetsOnlyItsHoldersJoin) {
  const std::string token = writeToken("token", "the job's own secret");
  const std::string other = writeToken("other", "somebody else's");
  test_support::DaemonProcess daemon({"--token-file", token});
  Subprocess a =
      agent("a", "2", daemon.port(), {}, {"--rdzv-conf", "is_host=0,token_file=" + token});
  Subprocess b =
      agent("b", "2", daemon.port(), {}, {"--rdzv-conf", "is_host=0,token_file=" + token});
  const auto a_status = a.waitFor(30s);
  const auto b_status = b.waitFor(30s);
  ASSERT_TRUE(a_status && a_status->success()) << logs();
  ASSERT_TRUE(b_status && b_status->success()) << logs();
  for (const std::vector<std::string>& conf :
       {std::vector<std::string>{"--rdzv-conf", "is_host=0,join_timeout=10,token_file=" + other},
        std::vector<std::string>{"--rdzv-conf", "is_host=0,join_timeout=10"}}) {
    Subprocess mallory = agent("m", "2", daemon.port(), {}, conf);
    const auto status = mallory.waitFor(20s);
    ASSERT_TRUE(status) << log("m");
    EXPECT_EQ(status->shellCode(), 1) << log("m");
    EXPECT_TRUE(contains(log("m"), "requires the job's token")) << log("m");
  }
  EXPECT_FALSE(contains(daemon.stderrText(), "the job's own secret")) << daemon.stderrText();
}

// With a token, a stranger who reads a waiting agent's id from the job's
// status cannot stop it: joins naming it, for its session and the next
// ones, are refused on the stranger's connection before anything is written,
// and the agent goes on to run the job.
TEST_F(RendezvousLossTest, AStrangersJoinNamingAWaitingAgentDoesNotStopIt) {
  namespace protocol = proto::rendezvous;
  const std::string token = writeToken("token", "the job's own secret");
  test_support::DaemonProcess daemon({"--token-file", token});
  const std::vector<std::string> conf = {"--rdzv-conf", "is_host=0,token_file=" + token};
  Subprocess a = agent("a", "2", daemon.port(), {}, conf);
  std::string id;  // a's, as anyone may ask for it
  ASSERT_TRUE(test_support::eventually(
      [&] {
        rdzv::StoreClient asker("127.0.0.1", daemon.port(), 5s);
        const std::string answer =
            asker.query(protocol::queryKey(protocol::statusQuestion("job7")));
        if (contains(answer, "\"error\"")) {
          return false;
        }
        const auto status = protocol::decodeJobStatus(answer);
        id = status.members.empty() ? "" : status.members.front().agent;
        return !id.empty();
      },
      30s))
      << logs();
  for (std::int64_t session = 0; session < 4; ++session) {
    protocol::JoinRequest join;
    join.agent = id;
    join.session = session;
    join.min_nodes = join.max_nodes = 2;
    join.store_host = "mallory";
    join.store_port = 1;
    rdzv::StoreClient mallory("127.0.0.1", daemon.port(), 5s);
    mallory.set(protocol::verbKey("job7", protocol::Verb::kJoin), protocol::encodeJoin(join));
    EXPECT_ANY_THROW(mallory.ping()) << "a stranger joined as " << id;
  }
  Subprocess b = agent("b", "2", daemon.port(), {}, conf);
  const auto a_status = a.waitFor(30s);
  const auto b_status = b.waitFor(30s);
  ASSERT_TRUE(a_status && a_status->success()) << logs();
  ASSERT_TRUE(b_status && b_status->success()) << logs();
}

// Rounds that end faster than the keep-alive interval keep each agent's
// lease busy with requests (restart, store_ready); the heartbeat must still
// go out every interval, so no live agent is dropped. (Each request used to
// put the next heartbeat off, and both agents were dropped 2 s in.)
TEST_F(RendezvousLossTest, AgentsWhoseRoundsEndFasterThanTheKeepAliveStayInTheJob) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> conf = {
      "--max-restarts", "20", "--rdzv-conf",
      "is_host=0,keep_alive_interval=1,keep_alive_max_attempt=2"};
  // Each attempt's workers fail after 0.2 s: 20 restarts take 4 s or more.
  const std::vector<std::string> fail_soon = {"--tick", "200", "1", "--exit", "3"};
  Subprocess a = agent("a", "2", daemon.port(), fail_soon, conf);
  Subprocess b = agent("b", "2", daemon.port(), fail_soon, conf);
  const auto started = std::chrono::steady_clock::now();
  const auto a_status = a.waitFor(120s);
  const auto b_status = b.waitFor(120s);
  ASSERT_TRUE(a_status && b_status) << logs();
  ASSERT_GT(std::chrono::steady_clock::now() - started, 2s)
      << "the rounds ended within the keep-alive bound: nothing was tested" << logs();
  // The restarts run out: the agent whose worker failed last exits 3, the
  // other 1 (the job failed on another node); neither was dropped.
  EXPECT_TRUE(a_status->shellCode() == 3 || b_status->shellCode() == 3) << logs();
  EXPECT_FALSE(a_status->success() || b_status->success()) << logs();
  EXPECT_FALSE(contains(logs(), "dropped this node")) << logs();
}

// An agent that falls silent past the keep-alive bound (here: stopped with
// SIGSTOP) is dropped while it still runs, and the job goes on without it.
// When it wakes, it learns it was dropped, stops its workers and joins
// again: the job re-forms with both nodes. (It used to exit 1, "the job goes
// on without it", so a network blip longer than the bound cost a node for
// good, or, when the hosting agent was cut off, the whole job.)
TEST_F(RendezvousLossTest, ADroppedAgentThatWakesUpJoinsTheJobAgain) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> conf = {
      "--rdzv-conf",
      "is_host=0,keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1"};
  const std::vector<std::string> wait_for_go = {"--after", go().string()};
  Subprocess a = agent("a", "1:2", daemon.port(), wait_for_go, conf);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a"); }, 30s)) << logs();
  Subprocess b = agent("b", "1:2", daemon.port(), wait_for_go, conf);
  const auto in_attempt = [&](const std::string& name, const std::string& attempt) {
    return ready(name) && env(name, 0)["TORCHELASTIC_RESTART_COUNT"] == attempt &&
           env(name, 1)["TORCHELASTIC_RESTART_COUNT"] == attempt;
  };
  ASSERT_TRUE(test_support::eventually([&] { return in_attempt("b", "1"); }, 30s)) << logs();
  const pid_t a_agent = test_support::ddprunAgentOf(a.pid());  // not its guardian
  ASSERT_EQ(::kill(a_agent, SIGSTOP), 0);
  ASSERT_TRUE(test_support::eventually([&] { return in_attempt("b", "2"); }, 30s))
      << "b did not go on alone" << logs();
  EXPECT_EQ(env("b", 0)["WORLD_SIZE"], "2") << logs();
  ASSERT_EQ(::kill(a_agent, SIGCONT), 0);
  ASSERT_TRUE(
      test_support::eventually([&] { return in_attempt("a", "3") && in_attempt("b", "3"); }, 30s))
      << "a did not join again" << logs();
  EXPECT_EQ(env("a", 0)["WORLD_SIZE"], "4") << logs();
  EXPECT_TRUE(contains(log("a"), "dropped this node")) << logs();
  std::ofstream(go()) << "go";
  const auto a_status = a.waitFor(30s);
  const auto b_status = b.waitFor(30s);
  ASSERT_TRUE(a_status && a_status->success()) << logs();
  ASSERT_TRUE(b_status && b_status->success()) << logs();
}

// The daemon falls silent past the keep-alive bound (here: SIGSTOP; on a
// cluster, a cut link) while one node's workers have finished and it waits
// in the exit barrier, and the other's still run. Every agent must still end
// (found by the chaos test: one waited in the exit barrier for good), and
// when the workers of both succeed, the job does.
TEST_F(RendezvousLossTest, ASilentDaemonDuringTheExitBarrierEndsEveryAgent) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> conf = {
      "--rdzv-conf",
      "is_host=0,keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1"};
  const fs::path go_b = dir_.path() / "go_b";
  Subprocess a = agent("a", "1:2", daemon.port(), {"--after", go().string()}, conf);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a"); }, 30s)) << logs();
  Subprocess b = agent("b", "1:2", daemon.port(), {"--after", go_b.string()}, conf);
  ASSERT_TRUE(
      test_support::eventually([&] { return ready("b") && env("b", 0)["WORLD_SIZE"] == "4"; }, 30s))
      << logs();
  std::ofstream(go()) << "go";
  ASSERT_TRUE(logShows("a", "(the exit barrier)", 10s)) << logs();
  ASSERT_EQ(::kill(daemon.pid(), SIGSTOP), 0);
  ASSERT_TRUE(logShows("a", "the rendezvous daemon at", 10s)) << logs();
  ASSERT_TRUE(logShows("b", "the rendezvous daemon at", 10s)) << logs();
  std::this_thread::sleep_for(1s);  // well past the keep-alive bound
  ASSERT_EQ(::kill(daemon.pid(), SIGCONT), 0);
  std::ofstream(go_b) << "go";
  const auto a_status = a.waitFor(30s);
  const auto b_status = b.waitFor(30s);
  ASSERT_TRUE(a_status && b_status)
      << "an agent still runs 30 s later" << logs() << daemon.stderrText();
  EXPECT_TRUE(a_status->success()) << logs() << daemon.stderrText();
  EXPECT_TRUE(b_status->success()) << logs() << daemon.stderrText();
  EXPECT_TRUE(contains(log("a"), "answers again after")) << logs();
}

// An agent dropped while it waits in the exit barrier (here: stopped past the
// keep-alive bound), whose peers are gone meanwhile, ends at once with exit 1
// and says why: its round went on without it, so it can never be counted.
// (It joined again as a newcomer and waited out the exit barrier's 300 s for
// a round that could not form; found by the chaos test.)
TEST_F(RendezvousLossTest, AnAgentDroppedInTheExitBarrierEndsAtOnce) {
  test_support::DaemonProcess daemon;
  const std::vector<std::string> conf = {
      "--rdzv-conf",
      "is_host=0,keep_alive_interval=1,keep_alive_max_attempt=2,last_call_timeout=1"};
  Subprocess a = agent("a", "2", daemon.port(), {"--after", go().string()}, conf);
  Subprocess b = agent("b", "2", daemon.port(), {"--hang"}, conf);
  ASSERT_TRUE(test_support::eventually([&] { return ready("a") && ready("b"); }, 30s)) << logs();
  std::ofstream(go()) << "go";
  ASSERT_TRUE(logShows("a", "(the exit barrier)", 10s)) << logs();
  const pid_t a_agent = test_support::ddprunAgentOf(a.pid());
  ASSERT_EQ(::kill(a_agent, SIGSTOP), 0);
  const bool b_saw_it = logShows("b", "stopping", 10s);
  ::kill(b.pid(), SIGKILL);  // a's peer is gone for good
  b.wait();
  ASSERT_EQ(::kill(a_agent, SIGCONT), 0);
  ASSERT_TRUE(b_saw_it) << "b never saw a go" << logs();
  const auto a_status = a.waitFor(15s);
  ASSERT_TRUE(a_status) << "a still waits in the exit barrier" << logs();
  EXPECT_EQ(a_status->shellCode(), 1) << logs();
  EXPECT_TRUE(contains(log("a"), "dropped this node while it waited for the others")) << logs();
}

}  // namespace
}  // namespace ddprun::launcher
