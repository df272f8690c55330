#include "etcd_tools.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <system_error>

#include "ddprun/launcher/process/subprocess.hpp"

namespace ddprun::test_support::etcd_detail {

namespace {

// openssl's configuration for the certificates: a CA that may sign, and
// leaves that may not. The server certificate is also good for clients, as
// etcd's own gateway connects to its client port with it.
constexpr const char* kOpensslConfig = R"([req]
distinguished_name = dn
prompt = no
[dn]
CN = ddprun-test
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
[client_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
)";

class CertificateMaker {
 public:
  explicit CertificateMaker(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::ofstream(dir_ / "openssl.cnf") << kOpensslConfig;
  }

  // A self-signed CA named `name`: <name>.crt and <name>.key.
  void makeCa(const std::string& name) { run(name, "ca_ext", {}); }

  // A certificate `name` signed by the CA `ca`.
  void makeSigned(const std::string& name, const std::string& extensions, const std::string& ca) {
    run(name, extensions,
        {"-CA", (dir_ / (ca + ".crt")).string(), "-CAkey", (dir_ / (ca + ".key")).string()});
  }

  std::filesystem::path cert(const std::string& name) const { return dir_ / (name + ".crt"); }
  std::filesystem::path key(const std::string& name) const { return dir_ / (name + ".key"); }

 private:
  void run(const std::string& name, const std::string& extensions,
           const std::vector<std::string>& signer) {
    std::vector<std::string> argv = {"openssl", "req", "-x509", "-new", "-nodes"};
    argv.insert(argv.end(),
                {"-config", (dir_ / "openssl.cnf").string(), "-extensions", extensions});
    argv.insert(argv.end(), {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"});
    argv.insert(argv.end(), {"-keyout", key(name).string(), "-out", cert(name).string()});
    argv.insert(argv.end(), {"-days", "2", "-subj", "/CN=ddprun-test-" + name});
    argv.insert(argv.end(), signer.begin(), signer.end());
    CommandOptions options;
    options.env = launcher::inheritedEnvironment();
    const CommandResult output = runCommand(argv, options);
    if (output.code != 0) {
      throw std::runtime_error("openssl could not make the test certificate '" + name +
                               "' (exit code " + std::to_string(output.code) +
                               "): " + output.errors);
    }
  }

  std::filesystem::path dir_;
};

}  // namespace

std::string EtcdMember::clientAddress() const { return "127.0.0.1:" + std::to_string(client_port); }

std::string EtcdMember::peerUrl() const { return "http://127.0.0.1:" + std::to_string(peer_port); }

void EtcdMember::start(const std::vector<std::string>& argv, const Environment& env) {
  launcher::SpawnOptions options;
  options.argv = argv;
  options.env = env;
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    throw std::system_error(errno, std::generic_category(), "open " + log.string());
  }
  options.stdout_fd = log_fd;
  options.stderr_fd = log_fd;
  process_.reset();
  try {
    process_.emplace(options);
  } catch (...) {
    ::close(log_fd);
    throw;
  }
  ::close(log_fd);
}

void EtcdMember::kill() {
  if (running()) {
    process_->signalGroup(SIGKILL);
    process_->wait();
  }
}

bool EtcdMember::reapIfExited() { return process_ && process_->tryWait(); }

bool EtcdMember::running() const { return process_ && !process_->exitStatus(); }

std::optional<launcher::ExitStatus> EtcdMember::exitStatus() const {
  return process_ ? process_->exitStatus() : std::nullopt;
}

Environment environmentWithoutEtcdSettings() {
  Environment env;
  for (auto& [name, value] : launcher::inheritedEnvironment()) {
    if (!name.starts_with("ETCD_") && !name.starts_with("ETCDCTL_")) {
      env.emplace_back(name, value);
    }
  }
  return env;
}

std::optional<std::string> selfDeclaredLeader(const std::string& status_json) {
  const auto statuses = nlohmann::json::parse(status_json, nullptr, /*allow_exceptions=*/false);
  if (!statuses.is_array()) {
    return std::nullopt;
  }
  std::optional<std::string> leader;
  std::uint64_t leader_term = 0;
  for (const auto& entry : statuses) {
    const auto status = entry.value("Status", nlohmann::json::object());
    const auto id = status.value("header", nlohmann::json::object()).value("member_id", 0ULL);
    const auto term = status.value("raftTerm", 0ULL);
    if (id != 0 && status.value("leader", 0ULL) == id && term >= leader_term) {
      leader = entry.value("Endpoint", "");
      leader_term = term;
    }
  }
  return leader;
}

std::string lastLines(const std::string& text, int count) {
  // Where the kept part starts: after the count-th newline from the end,
  // not counting the one that ends the text.
  std::size_t start = text.size();
  if (start > 0 && text[start - 1] == '\n') {
    --start;
  }
  for (int lines = 0; lines < count; ++lines) {
    const auto newline = start == 0 ? std::string::npos : text.rfind('\n', start - 1);
    if (newline == std::string::npos) {
      return text;
    }
    start = newline;
  }
  return text.substr(start + 1);
}

EtcdServerTls makeEtcdTls(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  CertificateMaker maker(dir);
  maker.makeCa("ca");
  maker.makeSigned("server", "server_ext", "ca");
  maker.makeSigned("client", "client_ext", "ca");
  maker.makeCa("other-ca");
  EtcdServerTls tls;
  tls.client = {maker.cert("ca"), maker.cert("client"), maker.key("client"),
                maker.cert("other-ca")};
  tls.server_cert = maker.cert("server");
  tls.server_key = maker.key("server");
  return tls;
}

}  // namespace ddprun::test_support::etcd_detail
