// Measuring an agent's clock against the rendezvous': against an in-process
// server (one host, one clock, so the true offset is 0 and the estimate must
// lie within half the round trip), against a store that does not tell its
// clock, the watch that hands measurements on, and the static rendezvous,
// whose node 0 is the clock and whose other nodes measure it once joined.
#include "ddprun/launcher/rendezvous/clock_sync.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <mutex>
#include <optional>

#include "ddprun/launcher/rendezvous/static_rendezvous.hpp"
#include "ddprun/rendezvous/client.hpp"
#include "ddprun/rendezvous/server.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

rdzv::ServerOptions loopbackServer() {
  rdzv::ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  return options;
}

TEST(ClockSyncTest, OnOneHostTheOffsetIsWithinHalfTheRoundTripOfZero) {
  rdzv::Server server(loopbackServer());
  server.start();
  rdzv::StoreClient client("127.0.0.1", server.port(), 5s);
  const auto offset = measureClockOffset(client, kClockSamples, "the test's server");
  ASSERT_TRUE(offset);
  EXPECT_GT(offset->round_trip.count(), 0);
  EXPECT_LE(std::abs(offset->offset.count()), offset->round_trip.count() / 2 + 1)
      << offset->offset.count() << " ns off, round trip " << offset->round_trip.count() << " ns";
  EXPECT_EQ(offset->reference, "the test's server");
}

TEST(ClockSyncTest, TheBestSampleIsTheShortestRoundTrip) {
  BestClockSample best;
  best.offer({5ms, 30us});
  best.offer({7ms, 10us});
  best.offer({9ms, 20us});
  const ClockOffset offset = best.offset("x");
  EXPECT_EQ(offset.offset, 7ms);
  EXPECT_EQ(offset.round_trip, 10us);
}

TEST(ClockSyncTest, AWatcherGetsTheLatestMeasurementAtOnceAndEachLaterOne) {
  ClockWatch watch;
  watch.measured({1us, 2us, "a"});
  std::vector<ClockOffset> heard;
  watch.watch([&heard](const ClockOffset& offset) { heard.push_back(offset); });
  watch.measured({3us, 4us, "b"});
  watch.watch({});
  watch.measured({5us, 6us, "c"});
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0].reference, "a");
  EXPECT_EQ(heard[1].reference, "b");
}

// Node 1 measures node 0's store on the connection that watches it, after
// the join; node 0 is the store, offset 0, at once.
TEST(ClockSyncTest, StaticNodesMeasureTheClockOfNodeZerosStore) {
  StaticRendezvousOptions options;
  options.nnodes = 2;
  options.port = 0;
  options.run_id = "clock";
  options.hostname = "host-0";
  StaticRendezvous node0(options);
  options.node_rank = 1;
  options.port = node0.port();
  options.hostname = "host-1";
  StaticRendezvous node1(options);
  std::optional<ClockOffset> at0;
  node0.watchClock([&at0](const ClockOffset& offset) { at0 = offset; });
  ASSERT_TRUE(at0);
  EXPECT_EQ(at0->offset.count(), 0);
  const std::string reference = at0->reference;
  EXPECT_EQ(reference, "static rendezvous store at 127.0.0.1:" + std::to_string(node0.port()));

  std::promise<ClockOffset> measured;
  std::once_flag once;
  node1.watchClock([&](const ClockOffset& offset) {
    std::call_once(once, [&] { measured.set_value(offset); });
  });
  auto first = std::async(std::launch::async, [&] { return node0.nextGroup(); });
  ASSERT_TRUE(node1.nextGroup());
  ASSERT_TRUE(first.get());
  auto at1 = measured.get_future();
  ASSERT_EQ(at1.wait_for(10s), std::future_status::ready) << "node 1 never measured";
  const ClockOffset offset = at1.get();
  EXPECT_EQ(offset.reference, reference) << "both name the same clock";
  EXPECT_LE(std::abs(offset.offset.count()), offset.round_trip.count() / 2 + 1);
  node1.watchClock({});
}

}  // namespace
}  // namespace ddprun::launcher
