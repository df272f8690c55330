// ddprun's hostlist expansion held to Slurm's own: `scontrol show hostnames
// LIST` (slurm-client, which deploy/install-deps.sh installs) on every list
// of slurm_hostlist_cases.hpp. scontrol needs a slurm.conf to start, not a
// cluster: a minimal one is written to the test's temp dir. It prints the
// hosts one per line, or "Invalid hostlist" on stderr (and exits 0 either
// way, in 22.05).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "ddprun/launcher/process/executable_path.hpp"
#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/launcher/slurm/slurm_hostlist.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "slurm_hostlist_cases.hpp"

namespace ddprun::launcher {
namespace {

using testing::Hosts;

class SlurmHostlistScontrolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("PATH");
    path_ = path != nullptr ? path : "/usr/bin:/bin";
    scontrol_ = findExecutable("scontrol", path_).value_or("");
    ASSERT_FALSE(scontrol_.empty())
        << "scontrol is not on PATH (" << path_
        << "): install Slurm's client commands (deploy/install-deps.sh installs slurm-client)";
    std::ofstream(dir_ / "slurm.conf") << "ClusterName=t\nSlurmctldHost=localhost\n"
                                          "NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n";
  }

  // The hosts scontrol names, or nullopt when it says the list is invalid.
  std::optional<Hosts> scontrolHosts(const std::string& list) {
    SpawnOptions options;
    options.argv = {scontrol_, "show", "hostnames", list};
    options.env = {{"PATH", path_}, {"SLURM_CONF", (dir_ / "slurm.conf").string()}};
    const int out = ::open((dir_ / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open((dir_ / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    options.stdout_fd = out;
    options.stderr_fd = err;
    Subprocess child(options);
    ::close(out);
    ::close(err);
    const ExitStatus status = child.wait();
    const std::string errors = test_support::readFile(dir_ / "err");
    EXPECT_TRUE(status.success()) << "scontrol " << status.describe() << ": " << errors;
    if (errors.find("Invalid hostlist") != std::string::npos) {
      return std::nullopt;
    }
    EXPECT_EQ(errors, "") << list;
    Hosts hosts;
    std::istringstream lines(test_support::readFile(dir_ / "out"));
    for (std::string line; std::getline(lines, line);) {
      hosts.push_back(line);
    }
    return hosts;
  }

  test_support::TempDir dir_;
  std::string path_;
  std::string scontrol_;
};

TEST_F(SlurmHostlistScontrolTest, SlurmExpandsEveryValidListAsDdprunDoes) {
  for (const auto& [list, hosts] : testing::expandedCases()) {
    SCOPED_TRACE(list);
    EXPECT_EQ(scontrolHosts(list), hosts);
    EXPECT_EQ(expandHostlist(list), hosts);
  }
}

TEST_F(SlurmHostlistScontrolTest, SlurmRefusesWhatDdprunRefuses) {
  for (const std::string& list : testing::refusedByBoth()) {
    SCOPED_TRACE(list);
    EXPECT_EQ(scontrolHosts(list), std::nullopt);
    EXPECT_THROW(expandHostlist(list), HostlistError);
  }
}

// Where ddprun is stricter, Slurm still accepts the list, making the guess
// written in the table: should a Slurm release start refusing one, or guess
// otherwise, this test says so.
TEST_F(SlurmHostlistScontrolTest, SlurmGuessesWhereDdprunIsStricter) {
  for (const auto& [list, slurm_hosts] : testing::refusedByDdprunOnly()) {
    SCOPED_TRACE(list);
    EXPECT_EQ(scontrolHosts(list), slurm_hosts);
    EXPECT_THROW(expandHostlist(list), HostlistError);
  }
}

// Slurm's largest range, 65536 hosts, expanded alike.
TEST_F(SlurmHostlistScontrolTest, SlurmsLargestRangeIsExpandedAlike) {
  const std::string list = "n[00000-65535],m[7-8]";
  EXPECT_EQ(scontrolHosts(list), expandHostlist(list));
}

}  // namespace
}  // namespace ddprun::launcher
