// Private to EtcdCluster: running the command-line tools it drives (etcdctl,
// openssl) to completion, reading etcdctl's answers, and making the TLS
// material of a tls cluster with openssl. Stateless; called from the thread that owns the cluster.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ddprun/test_support/etcd_cluster.hpp"

namespace ddprun::test_support::etcd_detail {

using Environment = std::vector<std::pair<std::string, std::string>>;

struct ToolOutput {
  int exit_code = 0;  // as a shell reports it: 128 + signal when killed
  std::string out;
  std::string err;
};

// Runs `argv` (argv[0] found on the PATH of `env`) with `env`, its output in
// files under `scratch`; SIGKILLs it after `timeout` (exit code 137 then).
ToolOutput runTool(const std::vector<std::string>& argv, const Environment& env,
                   const std::filesystem::path& scratch, std::chrono::milliseconds timeout);

// This process's environment without etcd's and etcdctl's own variables
// (ETCD_*, ETCDCTL_*): both read them as flags, so a developer's settings
// would change the cluster under test.
Environment environmentWithoutEtcdSettings();

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
