// --hostfile's parts with no process: DeepSpeed's hostfile and selection
// syntax, each host's agent command line (ssh or local, the GPUs of a
// narrowed host, the variables passed on, secrets masked where shown), and
// the shell quoting the remote command relies on.
#include "ddprun/launcher/multihost/hostfile.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "ddprun/launcher/multihost/host_plan.hpp"
#include "ddprun/proto/errors.hpp"
#include "ddprun/test_support/temp_dir.hpp"

namespace ddprun::launcher {
namespace {

template <typename F>
std::string errorOf(F call) {
  try {
    call();
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "<no error>";
}

TEST(Hostfile, ReadsDeepSpeedsFormat) {
  const std::string text =
      "# the cluster\n"
      "\n"
      "worker-0 slots=4\n"
      "  worker-1   slots=2  # a comment after the slots\n";
  EXPECT_EQ(parseHostfile(text, "hosts"),
            (std::vector<HostSlots>{{"worker-0", 4}, {"worker-1", 2}}));
}

TEST(Hostfile, ABadLineIsNamedWithItsNumber) {
  EXPECT_EQ(errorOf([] { parseHostfile("a slots=1\nb slots=x\n", "hosts"); }),
            "hostfile hosts line 2 'b slots=x': expected 'HOST slots=N' with 1 <= N <= 4096");
  EXPECT_EQ(errorOf([] { parseHostfile("a\n", "hosts"); }),
            "hostfile hosts line 1 'a': expected 'HOST slots=N' with 1 <= N <= 4096");
  EXPECT_EQ(errorOf([] { parseHostfile("a slots=0\n", "hosts"); }),
            "hostfile hosts line 1 'a slots=0': expected 'HOST slots=N' with 1 <= N <= 4096");
  EXPECT_EQ(errorOf([] { parseHostfile("a slots=4097\n", "hosts"); }),
            "hostfile hosts line 1 'a slots=4097': expected 'HOST slots=N' with 1 <= N <= 4096");
  EXPECT_EQ(errorOf([] { parseHostfile("-oProxyCommand=x slots=1\n", "hosts"); }),
            "hostfile hosts line 1 '-oProxyCommand=x slots=1': a host name cannot start with '-' "
            "(ssh would read an option)");
  EXPECT_EQ(errorOf([] { parseHostfile("a slots=1\na slots=2\n", "hosts"); }),
            "hostfile hosts line 2 'a slots=2': a is listed twice");
  EXPECT_EQ(errorOf([] { parseHostfile("# nothing\n\n", "hosts"); }),
            "hostfile hosts: no host in it (lines 'HOST slots=N'; '#' starts a comment)");
}

TEST(Hostfile, AMissingFileIsOneLine) {
  EXPECT_EQ(errorOf([] { readHostfile("/nonexistent/hosts"); }),
            "--hostfile /nonexistent/hosts: no such file");
}

const std::vector<HostSlots> kHosts = {{"w0", 4}, {"w1", 4}, {"w2", 2}};

TEST(HostSelection, IncludeKeepsOnlyWhatItNames) {
  EXPECT_EQ(
      selectHosts(kHosts, "", ""),
      (std::vector<SelectedHost>{{"w0", {0, 1, 2, 3}}, {"w1", {0, 1, 2, 3}}, {"w2", {0, 1}}}));
  EXPECT_EQ(selectHosts(kHosts, "w2@w0:0,2", ""),
            (std::vector<SelectedHost>{{"w0", {0, 2}}, {"w2", {0, 1}}}));  // hostfile order
}

TEST(HostSelection, ExcludeDropsWhatItNames) {
  EXPECT_EQ(selectHosts(kHosts, "", "w1@w0:3"),
            (std::vector<SelectedHost>{{"w0", {0, 1, 2}}, {"w2", {0, 1}}}));
  EXPECT_EQ(selectHosts(kHosts, "", "w2:0,1"),
            (std::vector<SelectedHost>{{"w0", {0, 1, 2, 3}}, {"w1", {0, 1, 2, 3}}}));
}

TEST(HostSelection, MistakesAreOneLine) {
  EXPECT_EQ(errorOf([] { selectHosts(kHosts, "w9", ""); }),
            "--include 'w9': host w9 is not in the hostfile");
  EXPECT_EQ(errorOf([] { selectHosts(kHosts, "w2:2", ""); }),
            "--include 'w2:2': w2 has slots 0..1, not 2");
  EXPECT_EQ(errorOf([] { selectHosts(kHosts, "w0:a", ""); }),
            "--include 'w0:a': slots are integers >= 0, separated by ','");
  EXPECT_EQ(errorOf([] { selectHosts(kHosts, "", "w0@w1@w2"); }),
            "--exclude 'w0@w1@w2': leaves no slot of any host");
  EXPECT_EQ(errorOf([] { selectHosts(kHosts, "w0", "w1"); }),
            "--include and --exclude cannot be used together");
  EXPECT_EQ(errorOf([] { selectHosts(kHosts, ":1", ""); }),
            "--include ':1': a host name is missing (HOST[:SLOT,...][@HOST...])");
}

MultihostJob twoHostJob() {
  MultihostJob job;
  job.hosts = {{"localhost", {0, 1}}, {"w1", {1, 3}}};
  job.all_slots = {2, 4};
  job.nnodes = "2";
  job.rdzv_endpoint = "launcher:29400";
  job.rdzv_id = "job7";
  job.agent_options = {"--max-restarts", "3"};
  job.program = {"train", "--snapshot-path", "/shared/my job.pt"};
  job.working_dir = "/home/me/run";
  job.exported = {{"NCCL_DEBUG", "INFO"}, {"WANDB_API_KEY", "s3cret"}};
  job.secret = {"WANDB_API_KEY"};
  job.ssh_command = {"ssh", "-o", "BatchMode=yes"};
  job.local_ddprun = "/usr/bin/ddprun";
  return job;
}

TEST(HostPlan, ARemoteHostRunsDdprunOverSshInTheLaunchingDirectory) {
  const std::vector<HostAgent> agents = planHostAgents(twoHostJob());
  ASSERT_EQ(agents.size(), 2u);
  const HostAgent& remote = agents[1];
  EXPECT_TRUE(remote.over_ssh);
  ASSERT_EQ(remote.argv.size(), 5u);
  EXPECT_EQ(std::vector<std::string>(remote.argv.begin(), remote.argv.begin() + 4),
            (std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "w1"}));
  EXPECT_EQ(remote.argv[4],
            "cd /home/me/run && exec env NCCL_DEBUG=INFO WANDB_API_KEY=s3cret "
            "CUDA_VISIBLE_DEVICES=1,3 ddprun --stdin-hangup --nnodes=2 --nproc-per-node=2 "
            "--rdzv-backend=c10d --rdzv-endpoint=launcher:29400 --rdzv-id=job7 --max-restarts 3 "
            "train --snapshot-path '/shared/my job.pt'");
  // Shown, the secret's value is not.
  EXPECT_EQ(remote.shown.find("s3cret"), std::string::npos) << remote.shown;
  EXPECT_NE(remote.shown.find("WANDB_API_KEY=<from .ddprun_env>"), std::string::npos)
      << remote.shown;
}

TEST(HostPlan, LocalhostRunsThisDdprunWithoutSshAndAWholeHostKeepsItsGpus) {
  const HostAgent local = planHostAgents(twoHostJob())[0];
  EXPECT_FALSE(local.over_ssh);
  EXPECT_EQ(local.argv,
            (std::vector<std::string>{"/usr/bin/ddprun", "--nnodes=2", "--nproc-per-node=2",
                                      "--rdzv-backend=c10d", "--rdzv-endpoint=launcher:29400",
                                      "--rdzv-id=job7", "--max-restarts", "3", "train",
                                      "--snapshot-path", "/shared/my job.pt"}));
  EXPECT_EQ(local.env, (std::vector<std::pair<std::string, std::string>>{
                           {"NCCL_DEBUG", "INFO"}, {"WANDB_API_KEY", "s3cret"}}));
}

TEST(HostPlan, ShellQuotingSurvivesAnyByte) {
  EXPECT_EQ(shellQuoted("plain-word_1.0,x=y:z/@%+"), "plain-word_1.0,x=y:z/@%+");
  EXPECT_EQ(shellQuoted(""), "''");
  EXPECT_EQ(shellQuoted("it's $HOME `x`"), "'it'\\''s $HOME `x`'");
}

TEST(HostPlan, TheVariablesAJobNeedsArePassedOnAndEnvFilesAreSecret) {
  test_support::TempDir home;
  test_support::TempDir work;
  std::ofstream(home.path() / ".ddprun_env") << "TOKEN=from-home\nBOTH=home\n# no\n\n";
  std::ofstream(work.path() / ".ddprun_env") << "BOTH=work\n";
  const std::vector<std::string> names = {"NCCL_IB_HCA", "GLOO_SOCKET_IFNAME",   "PYTHONPATH",
                                          "CUDA_HOME",   "CUDA_VISIBLE_DEVICES", "HOME",
                                          "PATH",        "SECRET_OF_MINE"};
  const Environment env = [](std::string_view name) -> std::optional<std::string> {
    return std::string("v-") + std::string(name);
  };
  std::set<std::string> secret;
  const auto exported =
      exportedVariables(names, env, home.path().string(), work.path().string(), secret);
  EXPECT_EQ(exported, (std::vector<std::pair<std::string, std::string>>{
                          {"NCCL_IB_HCA", "v-NCCL_IB_HCA"},
                          {"GLOO_SOCKET_IFNAME", "v-GLOO_SOCKET_IFNAME"},
                          {"PYTHONPATH", "v-PYTHONPATH"},
                          {"CUDA_HOME", "v-CUDA_HOME"},
                          {"PATH", "v-PATH"},
                          {"BOTH", "work"},
                          {"TOKEN", "from-home"}}));
  EXPECT_EQ(secret, (std::set<std::string>{"BOTH", "TOKEN"}));
}

}  // namespace
}  // namespace ddprun::launcher
