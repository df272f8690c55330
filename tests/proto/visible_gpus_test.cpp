// CUDA_VISIBLE_DEVICES read as PyTorch reads it before it asks NVML, and the
// child's answer carried to the agent as JSON.
#include "ddprun/proto/visible_gpus.hpp"

#include <gtest/gtest.h>

#include "ddprun/proto/errors.hpp"

namespace ddprun::proto {
namespace {

using Ordinals = std::vector<long long>;
using Indices = std::vector<int>;
using Uuids = std::vector<std::string>;

TEST(VisibleDevicesTest, UnsetMeansEveryDevice) { EXPECT_FALSE(parseVisibleDevices(std::nullopt)); }

TEST(VisibleDevicesTest, OrdinalsAreReadAsStrtoulReadsThem) {
  EXPECT_EQ(parseVisibleDevices("2,5"), VisibleDeviceList(Ordinals{2, 5}));
  EXPECT_EQ(parseVisibleDevices(" 3 , 1"), VisibleDeviceList(Ordinals{3, 1}));
  EXPECT_EQ(parseVisibleDevices("1gpu,2x"), VisibleDeviceList(Ordinals{1, 2}));
  EXPECT_EQ(parseVisibleDevices("+4"), VisibleDeviceList(Ordinals{4}));
}

// Leading zeros do not count, and no length overflows: an ordinal of any
// size is past every device.
TEST(VisibleDevicesTest, OrdinalsOfAnyLengthAreReadWithoutOverflow) {
  EXPECT_EQ(parseVisibleDevices("0000000000000000000001"), VisibleDeviceList(Ordinals{1}));
  EXPECT_EQ(parseVisibleDevices("1,2147483648,4294967296"),
            VisibleDeviceList(Ordinals{1, 2147483648LL, 4294967296LL}));
  EXPECT_EQ(parseVisibleDevices("99999999999999999999"), VisibleDeviceList(Ordinals{kHugeOrdinal}));
  EXPECT_EQ(parseVisibleDevices("-0,1"), VisibleDeviceList(Ordinals{0, 1}));
}

TEST(VisibleDevicesTest, AnEntryThatIsNoOrdinalEndsTheList) {
  EXPECT_EQ(parseVisibleDevices("0,x,1"), VisibleDeviceList(Ordinals{0}));
  EXPECT_EQ(parseVisibleDevices("0,-1,1"), VisibleDeviceList(Ordinals{0}));
  EXPECT_EQ(parseVisibleDevices("0,,1"), VisibleDeviceList(Ordinals{0}));
  EXPECT_EQ(parseVisibleDevices(""), VisibleDeviceList(Ordinals{}));
  EXPECT_EQ(parseVisibleDevices("none"), VisibleDeviceList(Ordinals{}));
}

TEST(VisibleDevicesTest, ARepeatedEntryEmptiesTheList) {
  EXPECT_EQ(parseVisibleDevices("0,1,0"), VisibleDeviceList(Ordinals{}));
  EXPECT_EQ(parseVisibleDevices("GPU-a,GPU-b,GPU-a"), VisibleDeviceList(Uuids{}));
}

TEST(VisibleDevicesTest, UuidListsKeepTheirPrefixAndEndAtAnotherKind) {
  EXPECT_EQ(parseVisibleDevices("GPU-ab,GPU-cd,3"), VisibleDeviceList(Uuids{"GPU-ab", "GPU-cd"}));
  EXPECT_EQ(parseVisibleDevices("MIG-1,MIG-2"), VisibleDeviceList(Uuids{"MIG-1", "MIG-2"}));
}

TEST(VisibleDevicesTest, UuidPrefixesSelectOneDeviceEachInTheirOrder) {
  const Uuids uuids = {"GPU-aa11", "GPU-ab22", "GPU-c333"};
  EXPECT_EQ(ordinalsOfUuidPrefixes({"GPU-c", "GPU-aa"}, uuids), (Indices{2, 0}));
  EXPECT_EQ(ordinalsOfUuidPrefixes({"GPU-ab22"}, uuids), (Indices{1}));
  // Ambiguous ("GPU-a") or unknown ("GPU-d") ends the list.
  EXPECT_EQ(ordinalsOfUuidPrefixes({"GPU-c", "GPU-a", "GPU-aa"}, uuids), (Indices{2}));
  EXPECT_EQ(ordinalsOfUuidPrefixes({"GPU-d", "GPU-c"}, uuids), (Indices{}));
  // Two prefixes of one device empty it.
  EXPECT_EQ(ordinalsOfUuidPrefixes({"GPU-c3", "GPU-c333"}, uuids), (Indices{}));
}

TEST(VisibleDevicesTest, AnEmptyListIsAnsweredWithoutAskingALibrary) {
  const VisibleGpus gpus = probeVisibleGpus("");
  EXPECT_EQ(gpus.count, 0);
  EXPECT_EQ(gpus.counted_by, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(gpus.why_none, "CUDA_VISIBLE_DEVICES is set and empty, which hides every GPU");
  EXPECT_EQ(probeVisibleGpus("3,3").why_none,
            "CUDA_VISIBLE_DEVICES='3,3' selects no device (a repeated entry, or none is a device)");
}

TEST(VisibleGpusJsonTest, RoundTrips) {
  VisibleGpus gpus;
  gpus.count = 2;
  gpus.counted_by = "NVML";
  gpus.bus_ids = {"00000000:3B:00.0", ""};
  const VisibleGpus back = visibleGpusFromJson(toJson(gpus));
  EXPECT_EQ(back.count, 2);
  EXPECT_EQ(back.counted_by, "NVML");
  EXPECT_EQ(back.bus_ids, gpus.bus_ids);
  VisibleGpus none;
  none.why_none = "NVML: libnvidia-ml.so.1 is not installed; the CUDA driver \xff";
  EXPECT_EQ(visibleGpusFromJson(toJson(none)).count, 0);
}

TEST(VisibleGpusJsonTest, ABadAnswerIsAnErrorNamingIt) {
  EXPECT_THROW(visibleGpusFromJson("garbage"), Error);
  EXPECT_THROW(visibleGpusFromJson(R"({"count":1})"), Error);
  EXPECT_THROW(
      visibleGpusFromJson(R"({"count":2,"counted_by":"NVML","why_none":"","bus_ids":["a"]})"),
      Error);
  EXPECT_THROW(visibleGpusFromJson(R"({"count":-1,"counted_by":"","why_none":"","bus_ids":[]})"),
               Error);
}

}  // namespace
}  // namespace ddprun::proto
