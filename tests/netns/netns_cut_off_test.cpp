// The daemon's own host cut off (its link down, no FIN, no RST) while a job
// waits in its exit barrier, for longer than the keep-alive bound: every
// agent stops hearing the daemon and the daemon hears none of them. The
// silence is the daemon's own, so it must lose nobody for it; when the link
// heals, the barrier completes and every agent exits 0, as after an
// uninterrupted run. A daemon that dropped every member here reported a
// finished job failed (exit 1 on every agent).
#include "ddprun/proto/rendezvous_status.hpp"
#include "netns_job.hpp"

namespace ddprun::netns_test {
namespace {

namespace status = proto::rendezvous;

// keep_alive_interval x keep_alive_max_attempt: the bound the cut outlasts.
constexpr auto kKeepAliveBound = 3s;

class NetnsCutOffTest : public NetnsJobTest {
 protected:
  const std::vector<std::string> names_ = {"a", "b", "c"};

  // Agent `name` on `host` of a 3-node job whose 2 fake workers write their
  // environment, then exit 0 once <tmp>/<name>/release exists.
  Subprocess finishingAgent(const std::string& name, const std::string& host) {
    const std::string dir = dirOf(name).string();
    fs::create_directories(dir);
    return agent(name, host, "3",
                 {DDPRUN_FAKE_WORKER, "--env-to", dir, "--after", dir + "/release"},
                 {"--rdzv-conf", "keep_alive_interval=1,keep_alive_max_attempt=3"});
  }

  void release(const std::string& name) const { std::ofstream(dirOf(name) / "release").put('\n'); }

  bool running(const std::string& name) const {
    return fs::exists(dirOf(name) / "0.env") && fs::exists(dirOf(name) / "1.env");
  }

  // The daemon's answer to `ddprun status --json`, asked on h0 itself, which
  // the cut does not separate from the daemon; nullopt if it gave none.
  std::optional<status::JobStatus> jobStatus() const {
    const CommandResult answer =
        runCommand(lab_->onHost("h0", {DDPRUN_BINARY, "status", "--rdzv-endpoint", endpoint(),
                                       "--rdzv-id", "netns-job", "--json"}));
    if (!answer.status.success()) {
      return std::nullopt;
    }
    try {
      return status::decodeJobStatus(answer.output);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  int membersDone() const {
    const auto job = jobStatus();
    if (!job) {
      return -1;
    }
    int done = 0;
    for (const status::MemberStatus& member : job->members) {
      done += member.state == status::MemberState::kDone ? 1 : 0;
    }
    return done;
  }
};

TEST_F(NetnsCutOffTest, ACutOfTheDaemonsLinkDuringTheExitBarrierFailsNobody) {
  buildLab(3);
  std::vector<Subprocess> agents;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    agents.push_back(finishingAgent(names_[i], "h" + std::to_string(i + 1)));
  }
  const bool all_running = test_support::eventually(
      [&] { return running("a") && running("b") && running("c"); }, 60s, 20ms);
  ASSERT_TRUE(all_running) << logs(names_);

  // a's workers succeed: a waits in the exit barrier, then the daemon's host
  // is cut off, and the others succeed behind the cut.
  release("a");
  ASSERT_TRUE(test_support::eventually([&] { return membersDone() == 1; }, 30s, 50ms))
      << logs(names_);
  lab_->setLink("h0", false);
  release("b");
  release("c");

  // Past the keep-alive bound the daemon still holds every member: nobody
  // is lost for its own silence.
  const bool anyone_lost = test_support::eventually(
      [&] {
        const auto job = jobStatus();
        return job && (!job->losses.empty() || job->members.size() != 3);
      },
      kKeepAliveBound * 3, 100ms);
  lab_->setLink("h0", true);
  const auto healed = std::chrono::steady_clock::now();
  EXPECT_FALSE(anyone_lost) << "the cut-off daemon lost an agent" << logs(names_);

  for (std::size_t i = 0; i < agents.size(); ++i) {
    const auto exited = agents[i].waitFor(90s);
    EXPECT_TRUE(exited && exited->success())
        << names_[i] << ": " << describe(exited) << logs(names_);
  }
  report("link_healed_to_every_agent_exited_ms", millisSince(healed));
  const auto job = jobStatus();
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->state, status::JobState::kClosed);
  EXPECT_TRUE(job->losses.empty()) << logs(names_);
  EXPECT_FALSE(daemon_->exitedStatus().has_value()) << "ddprund died: " << daemon_->stderrText();
}

}  // namespace
}  // namespace ddprun::netns_test
