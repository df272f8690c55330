// Joining an etcd-v3 rendezvous, with real ddprun agents: over TLS with the
// cluster's CA and a client certificate two nodes form a round; an etcd that
// refuses the connection, never answers, is no etcd, or shows a certificate
// of another CA ends the agent within join_timeout with one line that names
// etcd and why.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ddprun/test_support/command.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "etcd_job_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

using Clock = std::chrono::steady_clock;
using test_support::contains;
using testing::EtcdJobTest;

constexpr auto kJoinTimeout = 3s;
constexpr const char* kShortJoin =
    "keep_alive_interval=1,keep_alive_max_attempt=2,join_timeout=3,read_timeout=1";

// A TCP listener on 127.0.0.1 that is not etcd: with `reply` it answers every
// connection with it (an HTTP server that knows no /v3/ path); without, it
// never accepts, so the kernel completes the handshake and nothing answers.
// Its thread accepts until the listener is destroyed. Hand-written: a few
// lines of accept/write a test needs, where an HTTP library would be more.
class NotEtcd {
 public:
  explicit NotEtcd(std::string reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("NotEtcd: cannot listen on 127.0.0.1");
    }
    port_ = ntohs(address.sin_port);
    if (!reply_.empty()) {
      thread_ = std::thread([this] { serve(); });
    }
  }
  ~NotEtcd() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  NotEtcd(const NotEtcd&) = delete;
  NotEtcd& operator=(const NotEtcd&) = delete;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void serve() {
    while (!stop_) {
      pollfd listening{fd_, POLLIN, 0};
      if (::poll(&listening, 1, 50) != 1) continue;
      const int connection = ::accept(fd_, nullptr, nullptr);
      if (connection < 0) continue;
      char request[4096];
      pollfd readable{connection, POLLIN, 0};
      if (::poll(&readable, 1, 1000) == 1) {
        (void)::read(connection, request, sizeof(request));
      }
      (void)::write(connection, reply_.data(), reply_.size());
      ::close(connection);
    }
  }

  std::string reply_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class EtcdJoinTest : public EtcdJobTest {
 protected:
  // One agent of a 2-node job at `endpoints` that must fail to join: it ends
  // non-zero within join_timeout + 3 s. Returns its last "ddprun: " line.
  std::string failedJoinLine(const std::string& endpoints, const std::string& conf) {
    const auto start = Clock::now();
    Subprocess agent = etcdAgent("a", "2", 1, {DDPRUN_FAKE_WORKER}, conf, endpoints);
    const auto status = agent.waitFor(kJoinTimeout + 10s);
    const auto took = Clock::now() - start;
    EXPECT_TRUE(status) << "still running" << log("a");
    if (!status) return "";
    EXPECT_FALSE(status->success()) << log("a");
    EXPECT_LE(took, kJoinTimeout + 3s) << log("a");
    std::cout << "[ etcd ] failed join ended after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms"
              << std::endl;
    const std::string text = log("a");
    const auto at = text.rfind("ddprun: ");
    EXPECT_NE(at, std::string::npos) << text;
    if (at == std::string::npos) return "";
    const std::string line = text.substr(at, text.find('\n', at) - at);
    // One line: nothing follows it.
    EXPECT_EQ(text.find_first_not_of('\n', at + line.size()), std::string::npos) << text;
    return line;
  }
};

TEST_F(EtcdJoinTest, NothingListeningAtTheEndpointIsOneLineWithinJoinTimeout) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(test_support::freeLoopbackPort());
  const std::string line = failedJoinLine(endpoint, kShortJoin);
  EXPECT_TRUE(contains(line, "etcd")) << line;
  EXPECT_TRUE(contains(line, endpoint)) << line;
  EXPECT_TRUE(contains(line, "refused")) << line;
  EXPECT_TRUE(contains(line, "join_timeout")) << line;
}

TEST_F(EtcdJoinTest, AListenerThatNeverAnswersIsOneLineWithinJoinTimeout) {
  NotEtcd silent("");
  const std::string line = failedJoinLine(silent.endpoint(), kShortJoin);
  EXPECT_TRUE(contains(line, "etcd")) << line;
  EXPECT_TRUE(contains(line, silent.endpoint())) << line;
  EXPECT_TRUE(contains(line, "no answer")) << line;
}

TEST_F(EtcdJoinTest, AnHttpServerThatIsNotEtcdIsOneLineWithinJoinTimeout) {
  NotEtcd http(
      "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot here\n");
  const std::string line = failedJoinLine(http.endpoint(), kShortJoin);
  EXPECT_TRUE(contains(line, "etcd")) << line;
  EXPECT_TRUE(contains(line, http.endpoint())) << line;
  EXPECT_TRUE(contains(line, "404")) << line;
}

TEST_F(EtcdJoinTest, ACertificateOfAnotherCaIsOneLineWithinJoinTimeout) {
  cluster_ = std::make_unique<test_support::EtcdCluster>(test_support::EtcdClusterOptions{3, true});
  const auto& tls = cluster_->tls();
  const std::string conf = std::string(kShortJoin) +
                           ",protocol=https,cacert=" + tls.other_ca.string() +
                           ",cert=" + tls.cert.string() + ",key=" + tls.key.string();
  const std::string line = failedJoinLine(cluster_->endpoints(), conf);
  EXPECT_TRUE(contains(line, "etcd")) << line;
  EXPECT_TRUE(contains(line, cluster_->endpoint(0))) << line;
  EXPECT_TRUE(contains(line, "TLS")) << line;
}

// TLS is a module ddprun loads from where it is installed beside it
// (launcher/rendezvous/etcd/tls/). A copy of ddprun without it fails at once
// with one line naming the module, and exits 2 like any bad setting.
TEST_F(EtcdJoinTest, ACopyOfDdprunWithoutItsTlsModuleSaysSoInOneLine) {
  test_support::TempDir dir;
  std::filesystem::create_directory(dir / "bin");
  std::filesystem::copy_file(DDPRUN_BINARY, dir / "bin" / "ddprun");
  const auto result = test_support::runCommand(
      {(dir / "bin" / "ddprun").string(), "--nnodes", "2", "--rdzv-backend", "etcd-v3",
       "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-conf", "protocol=https", "--no-python", "true"},
      {});
  EXPECT_EQ(result.code, 2) << result.output << result.errors;
  const std::string expected =
      "ddprun: etcd over TLS needs ddprun's TLS module " + dir.path().string() + "/";
  EXPECT_EQ(result.errors.rfind(expected, 0), 0u) << result.errors;
  EXPECT_TRUE(contains(result.errors, "ddprun-etcd-tls.so: cannot open shared object file"))
      << result.errors;
  EXPECT_EQ(result.errors.find('\n'), result.errors.size() - 1) << result.errors;
}

// The positive case: the cluster's CA and a client certificate it signed.
TEST_F(EtcdJoinTest, TwoNodesFormARoundOverTls) {
  cluster_ = std::make_unique<test_support::EtcdCluster>(test_support::EtcdClusterOptions{3, true});
  const auto& tls = cluster_->tls();
  const std::string conf = std::string(kShortLeases) + ",protocol=https,cacert=" + tls.ca.string() +
                           ",cert=" + tls.cert.string() + ",key=" + tls.key.string();
  Subprocess a = fakeAgent("a", "2", {}, conf);
  Subprocess b = fakeAgent("b", "2", {}, conf);
  for (auto [name, agent] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
    const auto status = agent->waitFor(30s);
    ASSERT_TRUE(status) << name << " still runs" << logs({"a", "b"});
    EXPECT_TRUE(status->success()) << name << ": " << status->shellCode() << logs({"a", "b"});
    EXPECT_EQ(roundAndWorld(name), (std::pair{0, 4})) << logs({"a", "b"});
  }
}

}  // namespace
}  // namespace ddprun::launcher
