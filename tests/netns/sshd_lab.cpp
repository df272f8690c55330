#include "sshd_lab.hpp"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "ddprun/test_support/eventually.hpp"

namespace ddprun::netns_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kSshd = "/usr/sbin/sshd";

void makeKey(const fs::path& key) {
  const auto made = runCommand({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key.string()});
  if (made.code != 0) {
    throw std::runtime_error("ssh-keygen failed: " + made.output);
  }
}

// Parent pid of `pid` (field 4 of /proc/<pid>/stat), or -1.
pid_t parentOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) {
    return -1;
  }
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  char state = '?';
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

}  // namespace

std::vector<pid_t> descendantsOf(pid_t root) {
  std::vector<pid_t> found = {root};
  for (std::size_t checked = 0; checked < found.size(); ++checked) {
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      const pid_t pid = std::stoi(name);
      if (parentOf(pid) == found[checked]) {
        found.push_back(pid);
      }
    }
  }
  found.erase(found.begin());
  return found;
}

SshdOnHosts::SshdOnHosts(const NetLab& lab, const std::vector<std::string>& hosts, fs::path dir,
                         const std::string& client_host)
    : dir_(std::move(dir)) {
  if (::access(kSshd, X_OK) != 0) {
    throw std::runtime_error(std::string(kSshd) +
                             " is missing: deploy/install-deps.sh installs openssh-server");
  }
  fs::create_directories(dir_);
  fs::create_directories("/run/sshd");  // sshd's privilege separation directory
  makeKey(dir_ / "host_key");
  makeKey(dir_ / "client_key");
  fs::copy_file(dir_ / "client_key.pub", dir_ / "authorized_keys");
  for (const std::string& host : hosts) {
    const fs::path config = dir_ / ("sshd_config." + host);
    std::ofstream(config) << "ListenAddress " << lab.address(host) << "\n"
                          << "HostKey " << (dir_ / "host_key").string() << "\n"
                          << "AuthorizedKeysFile " << (dir_ / "authorized_keys").string() << "\n"
                          << "PidFile none\n"
                          << "PermitRootLogin prohibit-password\n"
                          << "PasswordAuthentication no\n"
                          << "KbdInteractiveAuthentication no\n"
                          << "UsePAM no\n"
                          << "StrictModes no\n"
                          << "SetEnv TMPDIR=" << dir_.string() << "\n"
                          << "LogLevel ERROR\n";
    launcher::SpawnOptions options;
    options.argv = lab.onHost(host, {kSshd, "-D", "-e", "-f", config.string()});
    options.env = {{"PATH", kChildPath}};
    sshd_.emplace(host, launcher::Subprocess(options));
  }
  for (const std::string& host : hosts) {
    std::vector<std::string> argv;
    std::istringstream words(sshCommand());
    for (std::string word; words >> word;) {
      argv.push_back(word);
    }
    argv.insert(argv.end(), {host, "true"});
    const bool reached = test_support::eventually(
        [&] { return runCommand(lab.onHost(client_host, argv), 10s).code == 0; }, 20s, 100ms);
    if (!reached) {
      std::string why = "the sshd on ";
      why += host;
      why += " never let ";
      why += client_host;
      why += " in: ";
      why += runCommand(lab.onHost(client_host, argv), 10s).output;
      throw std::runtime_error(why);
    }
  }
}

SshdOnHosts::~SshdOnHosts() {
  for (auto& [host, sshd] : sshd_) {
    for (const pid_t pid : descendantsOf(sshd.pid())) {
      ::kill(pid, SIGKILL);
    }
    sshd.signalGroup(SIGKILL);
  }
}

std::string SshdOnHosts::sshCommand() const {
  return "ssh -i " + (dir_ / "client_key").string() +
         " -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
         " -o LogLevel=ERROR -o ServerAliveInterval=1 -o ServerAliveCountMax=3";
}

void SshdOnHosts::killHost(const std::string& host) {
  auto& sshd = sshd_.at(host);
  // The sessions' own processes go too (the remote commands they run are
  // the test's to watch): a host that dies takes its sshd and sessions.
  for (const pid_t pid : descendantsOf(sshd.pid())) {
    const std::string comm = [&] {
      std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
      std::string name;
      std::getline(in, name);
      return name;
    }();
    if (comm == "sshd") {
      ::kill(pid, SIGKILL);
    }
  }
  sshd.signalGroup(SIGKILL);
}

}  // namespace ddprun::netns_test
