// EtcdCluster: a real etcd cluster (Debian's etcd-server) started for a test
// or a benchmark: N members on loopback ports, each with its data directory
// in one TempDir, each a launcher::Subprocess in its own process group,
// killed with the test process. The constructor returns once every member
// answers and the cluster has a leader; the destructor SIGKILLs what is
// left and removes the directory.
//
// With tls, the fixture makes a CA, a server certificate for 127.0.0.1 and
// localhost, a client certificate (the members require one), and a second CA
// nobody trusts (for mismatch tests), with the openssl command-line tool.
//
// Used by one thread, the one that constructed it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::test_support {

struct EtcdClusterOptions {
  int members = 3;
  bool tls = false;
};

struct EtcdTlsFiles {
  std::filesystem::path ca;        // the CA the members' certificates chain to
  std::filesystem::path cert;      // a client certificate that CA signed
  std::filesystem::path key;       // its key
  std::filesystem::path other_ca;  // a CA that signed nothing the members use
};

// What one etcdctl run printed and how it ended.
struct EtcdctlResult {
  int exit_code = 0;  // as a shell reports it: 128 + signal when killed
  std::string out;
  std::string err;
  bool ok() const { return exit_code == 0; }
};

class EtcdCluster {
 public:
  // Throws std::runtime_error (with the members' logs' last lines) when the
  // binary is missing or the cluster is not healthy within 30 s.
  explicit EtcdCluster(EtcdClusterOptions options = {});
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // The etcd binary (PATH's etcd, or $DDPRUN_ETCD), "" when there is none.
  static std::string binary();

  int size() const;
  // "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3": every member's client address,
  // as --rdzv-endpoint takes it.
  std::string endpoints() const;
  // One member's client address, "127.0.0.1:port".
  std::string endpoint(int member) const;
  std::uint16_t clientPort(int member) const;
  bool running(int member) const;
  // The member that is leader now, as the members' status says; waits (up
  // to 30 s) until one is. Throws std::runtime_error if none is.
  int leader() const;
  // SIGKILL one member and reap it.
  void kill(int member);
  // Start a killed member again on its data directory and ports; returns
  // once it answers (not necessarily once the cluster has quorum).
  void restart(int member);
  // Start every killed member again, as restart() does each, all at once (a
  // member alone, without a quorum of its peers, answers nothing); returns
  // once the cluster is healthy. Throws std::runtime_error if it is not
  // within 30 s.
  void restartAll();
  // Waits (up to `timeout`) until the running members have a leader and
  // serve a linearizable read. Throws std::runtime_error if not.
  void waitHealthy(std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
  // The certificates and keys (tls only).
  const EtcdTlsFiles& tls() const;
  // The last lines each member wrote, for a failed test's report.
  std::string logTail() const;
  // Runs etcdctl (API v3) with `args` against `endpoints` (every member's
  // when empty), with the cluster's CA and client certificate when tls;
  // `ca`, when given, replaces the CA (a mismatch test passes
  // tls().other_ca). SIGKILLs it after 15 s.
  EtcdctlResult etcdctl(const std::vector<std::string>& args, const std::string& endpoints = "",
                        const std::filesystem::path& ca = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddprun::test_support
