// NetnsJobTest: the fixture of the network-namespace tests. Each test builds
// its own NetLab: host "h0" runs an external ddprund on its own address, and
// hosts "h1", "h2", ... each run one ddprun agent (2 workers) whose output,
// logs and the fake workers' files go to <tmp>/<agent name>/. The temp dir is
// on the shared filesystem, as a real cluster's shared storage would be.
//
// Clean-up order: agents (locals of the test body) die first, then ddprund,
// then the namespaces, then the temp dir. The whole suite skips where
// namespaces cannot be built. Used by one test thread.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "netns_lab.hpp"

namespace ddprun::netns_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using launcher::ExitStatus;
using launcher::Subprocess;

using test_support::readFile;

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Milliseconds since `start`, for the timings the tests print.
inline long millisSince(std::chrono::steady_clock::time_point start) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count());
}

// Names the cases of a suite parametrized by a node's group rank.
inline std::string groupRankName(const ::testing::TestParamInfo<int>& param) {
  return "GroupRank" + std::to_string(param.param);
}

class NetnsJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto reason = unavailableReason()) {
      GTEST_SKIP() << *reason;
    }
  }

  // DDPRUN_NETNS_KEEP_LOGS=DIR keeps each test's files (agents' logs,
  // workers' env files, snapshot) in DIR/<suite>.<test>, for debugging.
  void TearDown() override {
    const char* keep = std::getenv("DDPRUN_NETNS_KEEP_LOGS");
    if (keep == nullptr || *keep == '\0') {
      return;
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "." + info->name();
    for (char& c : name) {
      c = c == '/' ? '_' : c;
    }
    const fs::path target = fs::path(keep) / name;
    std::error_code ignored;
    fs::remove_all(target, ignored);
    fs::create_directories(target, ignored);
    fs::copy(dir_.path(), target, fs::copy_options::recursive, ignored);
    if (daemon_) {
      std::ofstream(target / "ddprund.log") << daemon_->stderrText();
    }
  }

  // h0 (for ddprund) and h1..h<agents>, then ddprund on h0's address unless
  // the job needs none.
  void buildLab(int agents, bool with_daemon = true) {
    std::vector<std::string> hosts = {"h0"};
    for (int i = 1; i <= agents; ++i) {
      hosts.push_back("h" + std::to_string(i));
    }
    lab_.emplace(hosts, lab_network_);
    if (!with_daemon) {
      return;
    }
    // DaemonProcess appends --port 0 --port-file: the port is the daemon's pick.
    daemon_.emplace(ipBinary(),
                    std::vector<std::string>{"netns", "exec", lab_->namespaceOf("h0"),
                                             DDPRUND_BINARY, "--host", lab_->address("h0")});
  }

  std::string endpoint() const {
    return lab_->address("h0") + ":" + std::to_string(daemon_->port());
  }

  // One agent named `name` on `host`: ddprun --nnodes <nnodes> --nproc-per-node
  // 2 ... <program>, against the lab's ddprund. Its log dir is <tmp>/<name>/logs.
  Subprocess agent(const std::string& name, const std::string& host, const std::string& nnodes,
                   const std::vector<std::string>& program,
                   const std::vector<std::string>& launcher_args = {},
                   const std::string& run_id = "netns-job") {
    std::vector<std::string> args = {
        "--nnodes",       nnodes, "--nproc-per-node", "2",
        "--rdzv-backend", "c10d", "--rdzv-endpoint",  endpoint(),
        "--rdzv-id",      run_id, "--log-dir",        (dirOf(name) / "logs").string()};
    args.insert(args.end(), launcher_args.begin(), launcher_args.end());
    args.push_back("--no-python");
    args.insert(args.end(), program.begin(), program.end());
    return ddprunOn(name, host, args);
  }

  // `ddprun <args>` named `name` on `host`, exactly as a user would type it
  // there. Its stdout and stderr (workers' output included) go to
  // <tmp>/<name>/agent.log; $TMPDIR (where ddprun puts its logs by default)
  // is <tmp>/<name>; `path_front` is put before the usual PATH; `extra_env`
  // is added to the environment.
  Subprocess ddprunOn(const std::string& name, const std::string& host,
                      const std::vector<std::string>& args, const std::string& path_front = "",
                      const Variables& extra_env = {}) {
    const fs::path dir = dirOf(name);
    fs::create_directories(dir);
    std::vector<std::string> argv = {DDPRUN_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    launcher::SpawnOptions options;
    options.argv = lab_->onHost(host, argv, own_host_names_);
    options.env = {{"PATH", path_front.empty() ? kChildPath : path_front + ":" + kChildPath},
                   {"TMPDIR", dir.string()}};
    if (gloo_socket_ifname_) {
      options.env.emplace_back("GLOO_SOCKET_IFNAME", *gloo_socket_ifname_);
    }
    options.env.insert(options.env.end(), extra_env.begin(), extra_env.end());
    const int log =
        ::open((dir / "agent.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    options.stdout_fd = log;
    options.stderr_fd = log;
    Subprocess child(options);
    ::close(log);
    return child;
  }

  fs::path dirOf(const std::string& name) const { return dir_.path() / name; }

  std::string log(const std::string& name) const { return readFile(dirOf(name) / "agent.log"); }

  // Every agent's log, for assertion messages.
  std::string logs(const std::vector<std::string>& names) const {
    std::string text;
    for (const std::string& name : names) {
      text += "\n===== agent " + name + " =====\n" + log(name);
    }
    if (daemon_) {
      text += "\n===== ddprund =====\n" + daemon_->stderrText();
    }
    return text;
  }

  static std::string describe(const std::optional<ExitStatus>& status) {
    return status ? status->describe() : std::string("still running");
  }

  // A timing for the test's output and its XML report.
  void report(const std::string& key, long millis) {
    std::cout << "[ timing   ] " << key << ": " << millis << " ms" << std::endl;
    RecordProperty(key, std::to_string(millis));
  }

  // The GLOO_SOCKET_IFNAME agents get, as a user would set it; nullopt:
  // none. Set by default, so that the tests of other things do not depend on
  // how the lab's hosts resolve the machine's host name, which they share
  // (ddprun names the interface itself only where that name is loopback:
  // netns_interface_test.cpp).
  std::optional<std::string> gloo_socket_ifname_ = NetLab::kInterface;
  // Whether each agent runs with its host's name as its host name (NetLab::
  // onHost's own_name), so that agent ids name different hosts; by default
  // they share this machine's, as the tests of other things expect.
  bool own_host_names_ = false;
  // The first three octets of the lab hosts' addresses (NetLab's network).
  std::string lab_network_ = NetLab::kNetwork;
  test_support::TempDir dir_{"ddprun-netns-test"};
  std::optional<NetLab> lab_;
  std::optional<test_support::DaemonProcess> daemon_;
};

}  // namespace ddprun::netns_test
