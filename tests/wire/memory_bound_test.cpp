// Input that claims a lot of memory without sending it must not make
// ddprund commit that memory (the nmap/OOM problem PyTorch issue #106294
// describes), while legitimately large values just below the limit work.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "ddprun/test_support/daemon_process.hpp"
#include "ddprun/test_support/eventually.hpp"
#include "ddprun/test_support/hex.hpp"
#include "wire_client.hpp"

namespace ddprun::wire_test {
namespace {

using namespace std::chrono_literals;
using test_support::DaemonProcess;

constexpr std::size_t kMaxValueBytes = 8 * 1024 * 1024;  // ddprund's default --max-value-bytes
constexpr int kClaimingClients = 50;

// Each claiming client sends a ~30-byte SET header. A server that buffers
// only what arrived needs a few KiB per connection (well under 1 MiB for
// 50); one that commits the claimed size needs 50 x 8 MiB = 400 MiB. 64 MiB
// sits far from both, so allocator noise cannot fail the test and a server
// committing even 1.3 MiB per claimed value cannot pass it.
constexpr std::size_t kMaxGrowthKiB = 64 * 1024;

std::string claimHeader(int i) {
  const std::string set =
      encode(Dialect::Legacy113, Command::Set, {"/claim/" + std::to_string(i)}, {""});
  // Replace the empty value's length with the claimed one; send no value.
  std::string header = set.substr(0, set.size() - 8);
  proto::WireWriter(header).u64(kMaxValueBytes - 1);
  return header;
}

TEST(MemoryBoundTest, UnsentClaimedValuesDoNotGrowResidentMemory) {
  DaemonProcess daemon;
  WireClient control(daemon.port(), Dialect::Legacy113);
  ASSERT_TRUE(control.roundTrip());
  const auto baseline = daemon.residentKiB();
  ASSERT_TRUE(baseline.has_value());

  std::vector<RawConnection> claimers;
  for (int i = 0; i < kClaimingClients; ++i) {
    claimers.emplace_back(daemon.port());
    ASSERT_TRUE(claimers.back().sendAll(claimHeader(i)));
  }
  ASSERT_TRUE(control.roundTrip());
  // The headers are read asynchronously, and a server that commits memory
  // does so the moment it reads one; watch the peak over a short period.
  std::size_t peak = *baseline;
  test_support::eventually(
      [&] {
        peak = std::max(peak, daemon.residentKiB().value_or(0));
        return false;
      },
      300ms, 10ms);
  EXPECT_LT(peak - *baseline, kMaxGrowthKiB)
      << "VmRSS went from " << *baseline << " KiB to " << peak << " KiB";

  // Still open (their requests are incomplete, not invalid): otherwise the
  // bound above would hold trivially.
  for (RawConnection& claimer : claimers) {
    EXPECT_FALSE(claimer.waitForClose(0ms)) << claimer.localAddress() << " was closed";
  }
}

TEST(MemoryBoundTest, ValueJustBelowTheLimitRoundTrips) {
  DaemonProcess daemon;
  std::string value(kMaxValueBytes - 1, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) {
    value[i] = static_cast<char>(i * 131 % 251);  // no period that a bug could line up with
  }
  WireClient writer(daemon.port(), Dialect::Modern);
  writer.set("/big", value);
  WireClient reader(daemon.port(), Dialect::Legacy113);
  const auto got = reader.get("/big");
  ASSERT_TRUE(got.has_value()) << "no reply; " << reader.raw().buffered().size()
                               << " bytes buffered";
  EXPECT_EQ(got->size(), value.size());
  EXPECT_TRUE(*got == value) << "the value came back altered";
  EXPECT_TRUE(writer.roundTrip());
}

// A client that keeps asking for large values and never reads the replies:
// ddprund stops reading it once 16 MiB of replies are queued (so memory stays
// bounded), and closes it when it still has not read them after
// --request-timeout. Everyone else is served meanwhile.
TEST(MemoryBoundTest, ClientThatNeverReadsItsRepliesIsClosed) {
  DaemonProcess daemon({"--request-timeout", "2"});
  WireClient control(daemon.port(), Dialect::Legacy113);
  const std::string value(1024 * 1024, 'v');
  control.set("/big", value);
  ASSERT_TRUE(control.roundTrip());

  // 64 GETs ask for 64 MiB of replies: more than the kernel's socket buffers
  // on both sides plus ddprund's 16 MiB backlog.
  RawConnection hoarder(daemon.port());
  std::string requests;
  for (int i = 0; i < 64; ++i) {
    requests += encode(Dialect::Legacy113, Command::Get, {"/big"}, {});
  }
  ASSERT_TRUE(hoarder.sendAll(requests));

  EXPECT_TRUE(test_support::eventually(
      [&] { return daemon.stderrText().find("has not read its replies") != std::string::npos; },
      15s))
      << daemon.stderrText();
  EXPECT_LT(daemon.residentKiB().value_or(0), 128u * 1024) << "KiB resident after the backlog";
  ASSERT_TRUE(control.roundTrip());
}

}  // namespace
}  // namespace ddprun::wire_test
