// Private to EtcdCluster: its members' processes, reading etcdctl's answers,
// and making the TLS material of a tls cluster with openssl (run, as etcdctl
// is, with runCommand). Stateless; called from the thread that owns the
// cluster.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/etcd_cluster.hpp"

namespace ddprun::test_support::etcd_detail {

// This process's environment without etcd's and etcdctl's own variables
// (ETCD_*, ETCDCTL_*): both read them as flags, so a developer's settings
// would change the cluster under test.
Environment environmentWithoutEtcdSettings();

// One member's settings and, while it runs, its process (a
// launcher::Subprocess, its own process group) writing to `log`.
struct EtcdMember {
  std::string name;
  std::uint16_t client_port = 0;
  std::uint16_t peer_port = 0;
  std::filesystem::path data_dir;
  std::filesystem::path log;

  std::string clientAddress() const;  // "127.0.0.1:port"
  std::string peerUrl() const;        // "http://127.0.0.1:port"
  // Spawns `argv` with `env`, output appended to the log (a restarted
  // member's log keeps what it wrote before).
  void start(const std::vector<std::string>& argv, const Environment& env);
  // SIGKILLs and reaps it, if it runs.
  void kill();
  // Reaps it if it has exited; true when it has (now or before).
  bool reapIfExited();
  bool running() const;
  // How it ended, once reaped.
  std::optional<launcher::ExitStatus> exitStatus() const;

 private:
  std::optional<launcher::Subprocess> process_;
};

// The endpoint of the member that calls itself leader in the newest term,
// from `etcdctl endpoint status --write-out=json`; nullopt when none does
// (or the text is not that JSON).
std::optional<std::string> selfDeclaredLeader(const std::string& status_json);

// The last `count` lines of `text`.
std::string lastLines(const std::string& text, int count);

// What the members serve clients with, next to what the tests get.
struct EtcdServerTls {
  EtcdTlsFiles client;
  std::filesystem::path server_cert;  // SAN IP:127.0.0.1, DNS:localhost
  std::filesystem::path server_key;
};

// Makes the CA, the server and client certificates and the unrelated CA in
// `dir` with the openssl tool (EC P-256 keys: generated in milliseconds).
// Throws std::runtime_error with openssl's message when a step fails.
EtcdServerTls makeEtcdTls(const std::filesystem::path& dir);

}  // namespace ddprun::test_support::etcd_detail
