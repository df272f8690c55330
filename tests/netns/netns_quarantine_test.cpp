// Quarantine across real (namespaced) hosts, each with a host name of its
// own (agent ids "h1:<pid>", ...): with --nnodes=2:3 the worker on one host
// crashes on every attempt; after quarantine_after group failures that
// started there the host stands by and says so, `ddprun status` shows it,
// and the job finishes on the other two. The quarantined agent then ends
// with 121 (this node is unfit; docs/launcher.md).
#include <nlohmann/json.hpp>

#include "ddprun/proto/rendezvous_status.hpp"
#include "netns_job.hpp"

namespace ddprun::netns_test {
namespace {

namespace status = proto::rendezvous;

class NetnsQuarantineTest : public NetnsJobTest {
 protected:
  CommandResult statusJson() const {
    return runCommand(lab_->onHost("h0", {DDPRUN_BINARY, "status", "--rdzv-endpoint", endpoint(),
                                          "--rdzv-id", "netns-job", "--json"}));
  }

  // The quarantine's instant in agent `name`'s timeline, if it wrote one.
  nlohmann::json quarantineEvent(const std::string& name) const {
    for (const auto& run : fs::directory_iterator(dirOf(name) / "logs")) {
      const fs::path path = run.path() / "timeline.json";
      if (!fs::exists(path)) {
        continue;
      }
      for (const auto& event : nlohmann::json::parse(readFile(path))) {
        if (event.value("name", "") == "quarantined") {
          return event;
        }
      }
    }
    return nullptr;
  }
};

TEST_F(NetnsQuarantineTest, AHostWhoseWorkerCrashesEveryAttemptIsLeftOutAndTheJobEndsOnTwo) {
  own_host_names_ = true;
  buildLab(3);
  // One command on every host. On h3 (a bad host) the workers exit 3 at
  // once, every attempt; elsewhere they wait for `go`, which the test
  // writes once h3 is out, and succeed (the attempts h3 cut short before
  // are stopped by their agents).
  const fs::path go = dir_.path() / "go";
  const std::vector<std::string> program = {DDPRUN_FAKE_WORKER, "--exit-on-host", "h3", "3",
                                            "--after",          go.string()};
  const std::vector<std::string> args = {"--max-restarts", "3", "--rdzv-conf",
                                         "quarantine_after=2,quarantine_seconds=600"};
  const auto start = std::chrono::steady_clock::now();
  Subprocess a = agent("a", "h1", "2:3", program, args);
  Subprocess b = agent("b", "h2", "2:3", program, args);
  Subprocess c = agent("c", "h3", "2:3", program, args);
  const std::vector<std::string> names = {"a", "b", "c"};

  const std::string said =
      "this host (h3) is quarantined by rendezvous 'netns-job': 2 group "
      "failure(s) started here first";
  ASSERT_TRUE(test_support::eventually([&] { return contains(log("c"), said); }, 60s, 20ms))
      << logs(names);
  report("quarantined_after_ms", millisSince(start));
  EXPECT_TRUE(contains(log("c"), "it stands by as a spare until")) << log("c");

  const CommandResult answer = statusJson();
  ASSERT_EQ(answer.code, 0) << answer.output;
  const status::JobStatus job = status::decodeJobStatus(answer.output);
  ASSERT_EQ(job.quarantined.size(), 1u) << answer.output;
  EXPECT_EQ(job.quarantined[0].host, "h3");
  EXPECT_EQ(job.quarantined[0].failures, 2);
  EXPECT_GT(job.quarantined[0].left_ms, 0);
  ASSERT_EQ(job.spares.size(), 1u) << answer.output;
  EXPECT_EQ(job.spares[0].host, "h3");
  ASSERT_EQ(job.members.size(), 2u) << answer.output;
  for (const status::MemberStatus& member : job.members) {
    EXPECT_NE(member.host, "h3") << answer.output;
  }
  ASSERT_TRUE(job.last_failure.has_value()) << answer.output;
  EXPECT_EQ(job.last_failure->host, "h3") << answer.output;

  std::ofstream(go) << "go\n";
  const auto a_status = a.waitFor(60s);
  const auto b_status = b.waitFor(60s);
  const auto c_status = c.waitFor(60s);
  report("job_ended_ms", millisSince(start));
  EXPECT_TRUE(a_status && a_status->success()) << describe(a_status) << logs(names);
  EXPECT_TRUE(b_status && b_status->success()) << describe(b_status) << logs(names);
  ASSERT_TRUE(c_status.has_value()) << logs(names);
  EXPECT_EQ(c_status->kind, ExitStatus::Kind::Exited) << describe(c_status);
  EXPECT_EQ(c_status->code, 121) << describe(c_status) << logs(names);
  EXPECT_TRUE(contains(log("c"),
                       "the job ended without this node: the rendezvous quarantined "
                       "this host"))
      << log("c");
  // The job's last round ran on h1 and h2 alone, and h3 stood by in it.
  for (const std::string& name : {std::string("a"), std::string("b")}) {
    EXPECT_TRUE(contains(log(name), " of 2, ranks ")) << log(name);
  }
  const nlohmann::json event = quarantineEvent("c");
  ASSERT_FALSE(event.is_null()) << "no quarantine in h3's timeline";
  EXPECT_EQ(event["args"]["host"], "h3");
  EXPECT_EQ(event["args"]["failures"], 2);
  EXPECT_FALSE(daemon_->exitedStatus().has_value()) << "ddprund died";
}

}  // namespace
}  // namespace ddprun::netns_test
