// An sshd on each of a NetLab's hosts, for the --hostfile tests: Debian's
// openssh-server with a configuration, a host key and an authorized key of
// the test's own (all in `dir`): root logs in by that key only, on port 22
// of the host's address, its sessions' TMPDIR `dir` (where the ddprun
// agents they start, without --log-dir, put their logs: they go with the
// test's directory). sshCommand() is how a client on a lab host reaches
// them (the test's key, no known_hosts, keep-alives a second apart, so a
// dropped session is seen within 3 s).
//
// Owns the sshd processes; the destructor kills each with every session it
// serves. Used by one test thread.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "netns_lab.hpp"

namespace ddprun::netns_test {

class SshdOnHosts {
 public:
  // Starts an sshd on each of `hosts` and waits until `client_host` can run
  // a command on each over ssh. Throws std::runtime_error saying why not.
  SshdOnHosts(const NetLab& lab, const std::vector<std::string>& hosts, std::filesystem::path dir,
              const std::string& client_host);
  ~SshdOnHosts();
  SshdOnHosts(const SshdOnHosts&) = delete;
  SshdOnHosts& operator=(const SshdOnHosts&) = delete;

  // The ssh command line, for --ssh-command: "ssh -i KEY -o ...".
  std::string sshCommand() const;
  // Kills `host`'s sshd and every session it serves, as a host that goes
  // down takes its sshd with it: each client's session drops.
  void killHost(const std::string& host);

 private:
  std::filesystem::path dir_;
  std::map<std::string, launcher::Subprocess> sshd_;
};

// The pids of every descendant of `pid`, read from /proc.
std::vector<pid_t> descendantsOf(pid_t root);

}  // namespace ddprun::netns_test
