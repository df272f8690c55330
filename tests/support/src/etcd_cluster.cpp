#include "ddprun/test_support/etcd_cluster.hpp"

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "ddprun/launcher/process/executable_path.hpp"
#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/raw_connection.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun/test_support/text.hpp"
#include "etcd_tools.hpp"

namespace ddprun::test_support {

namespace {

using Millis = std::chrono::milliseconds;
using etcd_detail::EtcdMember;

constexpr Millis kWaitLimit(30000);
constexpr Millis kPollInterval(50);
constexpr Millis kEtcdctlLimit(15000);
// A port picked free can be taken by someone else before etcd binds it
// (parallel tests): the cluster is then started again on new ports.
constexpr int kStartAttempts = 3;
constexpr int kLogTailLines = 15;

std::string pathVariable() {
  const char* path = std::getenv("PATH");
  return path != nullptr ? path : "/usr/bin:/bin";
}

// A question asked again and again while waiting: short timeouts (the last
// flag given wins), so one try at a member not listening yet does not hold
// the loop for etcdctl's default deadlines.
std::vector<std::string> polled(std::vector<std::string> args) {
  args.insert(args.end(), {"--dial-timeout=300ms", "--command-timeout=1s"});
  return args;
}

}  // namespace

struct EtcdCluster::Impl {
  EtcdClusterOptions options;
  std::string etcd;
  std::string etcdctl;
  TempDir dir{"ddprun-etcd"};
  Environment env = etcd_detail::environmentWithoutEtcdSettings();
  std::optional<etcd_detail::EtcdServerTls> tls;
  std::vector<EtcdMember> members;
  std::string token;

  void start();
  void assignPorts(int attempt);
  std::vector<std::string> memberArgv(const EtcdMember& member) const;
  void killAll();
  bool anyExited();
  bool lostPortRace() const;
  std::string exitedMembers() const;
  std::string runningEndpoints() const;
  std::optional<int> currentLeader() const;
  bool healthy() const;
  bool runningMembersListen() const;
  int memberAt(const std::string& endpoint) const;
  EtcdctlResult etcdctlRun(const std::vector<std::string>& args, const std::string& endpoints,
                           const std::filesystem::path& ca) const;
  const EtcdMember& at(int member) const;
};

const EtcdMember& EtcdCluster::Impl::at(int member) const {
  if (member < 0 || member >= static_cast<int>(members.size())) {
    throw std::out_of_range("no etcd member " + std::to_string(member) + " in a cluster of " +
                            std::to_string(members.size()));
  }
  return members[member];
}

void EtcdCluster::Impl::assignPorts(int attempt) {
  members.resize(options.members);
  for (int i = 0; i < options.members; ++i) {
    EtcdMember& member = members[i];
    member.name = "member" + std::to_string(i);
    member.client_port = freeLoopbackPort();
    member.peer_port = freeLoopbackPort();
    member.data_dir = dir / (member.name + ".data");
    member.log = dir / (member.name + ".log");
    std::filesystem::remove_all(member.data_dir);
  }
  // The temp dir's name is unique on this machine, so is the token: members
  // of two clusters never take each other for peers.
  token = "ddprun-test-" + dir.path().filename().string() + "-" + std::to_string(attempt);
}

std::vector<std::string> EtcdCluster::Impl::memberArgv(const EtcdMember& member) const {
  std::string initial_cluster;
  for (const EtcdMember& peer : members) {
    initial_cluster += (initial_cluster.empty() ? "" : ",") + peer.name + "=" + peer.peerUrl();
  }
  const std::string client_url = (tls ? "https://" : "http://") + member.clientAddress();
  // Heartbeats every 50 ms and elections after 500 ms: a killed leader is
  // replaced within a second, so failover tests stay fast. On a restart
  // from an existing data dir etcd ignores the --initial-* flags.
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"--name", member.name},
      {"--data-dir", member.data_dir.string()},
      {"--listen-client-urls", client_url},
      {"--advertise-client-urls", client_url},
      {"--listen-peer-urls", member.peerUrl()},
      {"--initial-advertise-peer-urls", member.peerUrl()},
      {"--initial-cluster", initial_cluster},
      {"--initial-cluster-state", "new"},
      {"--initial-cluster-token", token},
      {"--heartbeat-interval", "50"},
      {"--election-timeout", "500"},
      {"--logger", "zap"},
      {"--log-outputs", "stderr"}};
  std::vector<std::string> argv = {etcd};
  for (const auto& [flag, value] : flags) {
    argv.insert(argv.end(), {flag, value});
  }
  if (tls) {
    argv.insert(argv.end(),
                {"--cert-file", tls->server_cert.string(), "--key-file", tls->server_key.string(),
                 "--client-cert-auth", "--trusted-ca-file", tls->client.ca.string()});
  }
  return argv;
}

void EtcdCluster::Impl::killAll() {
  for (EtcdMember& member : members) {
    member.kill();
  }
}

bool EtcdCluster::Impl::anyExited() {
  bool exited = false;
  for (EtcdMember& member : members) {
    exited = member.reapIfExited() || exited;
  }
  return exited;
}

bool EtcdCluster::Impl::lostPortRace() const {
  for (const EtcdMember& member : members) {
    if (contains(readFile(member.log), "address already in use")) {
      return true;
    }
  }
  return false;
}

void EtcdCluster::Impl::start() {
  for (int attempt = 1;; ++attempt) {
    assignPorts(attempt);
    for (EtcdMember& member : members) {
      member.start(memberArgv(member), env);
    }
    bool exited = false;
    if (eventually([&] { return (exited = anyExited()) || (healthy() && currentLeader()); },
                   kWaitLimit, kPollInterval) &&
        !exited) {
      return;
    }
    const bool retry = exited && lostPortRace() && attempt < kStartAttempts;
    const std::string why = exited ? exitedMembers() : "no healthy leader within 30 s";
    killAll();
    if (!retry) {
      throw std::runtime_error("etcd cluster did not start: " + why);
    }
  }
}

// "member1 exited with code 1": the members that ended on their own.
std::string EtcdCluster::Impl::exitedMembers() const {
  std::string exited;
  for (const EtcdMember& member : members) {
    if (const auto status = member.exitStatus()) {
      exited += (exited.empty() ? "" : ", ") + member.name + " " + status->describe();
    }
  }
  return exited;
}

std::string EtcdCluster::Impl::runningEndpoints() const {
  std::string endpoints;
  for (const EtcdMember& member : members) {
    if (member.running()) {
      endpoints += (endpoints.empty() ? "" : ",") + member.clientAddress();
    }
  }
  return endpoints;
}

// A connection attempt is refused at once, where etcdctl would wait for its
// deadline: asked first, it keeps the polls before the members listen short.
bool EtcdCluster::Impl::runningMembersListen() const {
  for (const EtcdMember& member : members) {
    if (member.running()) {
      try {
        RawConnection probe(member.client_port);
      } catch (const std::system_error&) {
        return false;
      }
    }
  }
  return true;
}

int EtcdCluster::Impl::memberAt(const std::string& endpoint) const {
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].clientAddress() == endpoint) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

bool EtcdCluster::Impl::healthy() const {
  const std::string endpoints = runningEndpoints();
  return !endpoints.empty() && runningMembersListen() &&
         etcdctlRun(polled({"endpoint", "health"}), endpoints, {}).ok();
}

// etcdctl prints the status of the members that answered even when another
// did not.
std::optional<int> EtcdCluster::Impl::currentLeader() const {
  const std::string endpoints = runningEndpoints();
  if (endpoints.empty()) {
    return std::nullopt;
  }
  const EtcdctlResult result =
      etcdctlRun(polled({"endpoint", "status", "--write-out=json"}), endpoints, {});
  const auto endpoint = etcd_detail::selfDeclaredLeader(result.out);
  if (!endpoint || memberAt(*endpoint) < 0) {
    return std::nullopt;
  }
  return memberAt(*endpoint);
}

EtcdctlResult EtcdCluster::Impl::etcdctlRun(const std::vector<std::string>& args,
                                            const std::string& endpoints,
                                            const std::filesystem::path& ca) const {
  std::vector<std::string> argv = {etcdctl, "--endpoints", endpoints, "--dial-timeout=2s",
                                   "--command-timeout=5s"};
  if (tls) {
    argv.insert(argv.end(), {"--cacert", (ca.empty() ? tls->client.ca : ca).string(), "--cert",
                             tls->client.cert.string(), "--key", tls->client.key.string()});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  Environment etcdctl_env = env;
  etcdctl_env.emplace_back("ETCDCTL_API", "3");
  CommandOptions command;
  command.env = std::move(etcdctl_env);
  command.timeout = kEtcdctlLimit;
  const CommandResult output = runCommand(argv, command);
  return {output.code, output.output, output.errors};
}

std::string EtcdCluster::binary() {
  if (const char* env = std::getenv("DDPRUN_ETCD"); env != nullptr && *env != '\0') {
    return env;
  }
  return launcher::findExecutable("etcd", pathVariable()).value_or("");
}

EtcdCluster::EtcdCluster(EtcdClusterOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.members < 1) {
    throw std::invalid_argument("an etcd cluster needs at least one member, not " +
                                std::to_string(options.members));
  }
  impl_->options = options;
  impl_->etcd = binary();
  if (impl_->etcd.empty() || !launcher::isExecutableFile(impl_->etcd)) {
    throw std::runtime_error("no etcd binary ('" + impl_->etcd +
                             "' from $DDPRUN_ETCD or PATH): deploy/install-deps.sh installs "
                             "etcd-server");
  }
  impl_->etcdctl = launcher::findExecutable("etcdctl", pathVariable()).value_or("");
  if (impl_->etcdctl.empty()) {
    throw std::runtime_error("no etcdctl on PATH: deploy/install-deps.sh installs etcd-client");
  }
  if (options.tls) {
    impl_->tls = etcd_detail::makeEtcdTls(impl_->dir / "tls");
  }
  try {
    impl_->start();
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(std::string(error.what()) + "\n" + logTail());
  }
}

EtcdCluster::~EtcdCluster() { impl_->killAll(); }

int EtcdCluster::size() const { return static_cast<int>(impl_->members.size()); }

std::string EtcdCluster::endpoints() const {
  std::string all;
  for (int i = 0; i < size(); ++i) {
    all += (all.empty() ? "" : ",") + endpoint(i);
  }
  return all;
}

std::string EtcdCluster::endpoint(int member) const { return impl_->at(member).clientAddress(); }

std::uint16_t EtcdCluster::clientPort(int member) const { return impl_->at(member).client_port; }

bool EtcdCluster::running(int member) const {
  impl_->anyExited();
  return impl_->at(member).running();
}

int EtcdCluster::leader() const {
  std::optional<int> leader;
  if (!eventually([&] { return (leader = impl_->currentLeader()).has_value(); }, kWaitLimit,
                  kPollInterval)) {
    throw std::runtime_error("no etcd member is leader after 30 s\n" + logTail());
  }
  return *leader;
}

void EtcdCluster::kill(int member) {
  impl_->at(member);
  EtcdMember& target = impl_->members[member];
  target.kill();
}

void EtcdCluster::restart(int member) {
  impl_->at(member);
  EtcdMember& target = impl_->members[member];
  if (target.running()) {
    throw std::logic_error("etcd member " + std::to_string(member) + " is still running");
  }
  target.start(impl_->memberArgv(target), impl_->env);
  bool exited = false;
  const bool answers = eventually(
      [&] {
        exited = target.reapIfExited();
        return exited ||
               (impl_->runningMembersListen() &&
                impl_->etcdctlRun(polled({"endpoint", "status"}), endpoint(member), {}).ok());
      },
      kWaitLimit, kPollInterval);
  if (!answers || exited) {
    throw std::runtime_error("restarted etcd member " + std::to_string(member) +
                             (exited ? " exited" : " does not answer after 30 s") + "\n" +
                             logTail());
  }
}

void EtcdCluster::restartAll() {
  for (EtcdMember& member : impl_->members) {
    if (!member.running()) {
      member.start(impl_->memberArgv(member), impl_->env);
    }
  }
  waitHealthy(kWaitLimit);
}

void EtcdCluster::waitHealthy(std::chrono::milliseconds timeout) const {
  if (!eventually([&] { return impl_->healthy() && impl_->currentLeader(); }, timeout,
                  kPollInterval)) {
    throw std::runtime_error("etcd cluster (members " + impl_->runningEndpoints() +
                             ") not healthy within " + std::to_string(timeout.count()) + " ms\n" +
                             logTail());
  }
}

const EtcdTlsFiles& EtcdCluster::tls() const {
  if (!impl_->tls) {
    throw std::logic_error("this etcd cluster was started without tls");
  }
  return impl_->tls->client;
}

std::string EtcdCluster::logTail() const {
  std::ostringstream tail;
  for (const EtcdMember& member : impl_->members) {
    tail << "--- etcd " << member.name << " (" << member.log.string() << "), last lines:\n"
         << etcd_detail::lastLines(readFile(member.log), kLogTailLines);
  }
  return tail.str();
}

EtcdctlResult EtcdCluster::etcdctl(const std::vector<std::string>& args,
                                   const std::string& endpoints,
                                   const std::filesystem::path& ca) const {
  return impl_->etcdctlRun(args, endpoints.empty() ? this->endpoints() : endpoints, ca);
}

}  // namespace ddprun::test_support
