// hwloc is loaded when a topology is first read, not linked: a library that
// is missing (or lacks a function) is one error naming it and why, and the
// one ddprun loads has the API its headers describe.
#include "hwloc_library.hpp"

#include <gtest/gtest.h>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher::detail {
namespace {

TEST(HwlocLibraryTest, AMissingLibraryIsOneErrorNamingIt) {
  try {
    loadHwloc("libhwloc-not-installed.so.15");
    FAIL() << "a library that is not installed loaded";
  } catch (const Error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("cannot read the machine's CPU topology"), std::string::npos) << what;
    EXPECT_NE(what.find("libhwloc-not-installed.so.15"), std::string::npos) << what;
  }
}

TEST(HwlocLibraryTest, ALibraryWithoutHwlocsFunctionsIsRefusedByName) {
  try {
    loadHwloc("libc.so.6");  // loads, but has none of them
    FAIL() << "libc was taken for hwloc";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("lacks hwloc_get_api_version"), std::string::npos)
        << error.what();
  }
}

TEST(HwlocLibraryTest, TheInstalledLibraryHasTheHeadersMajorVersion) {
  const HwlocLibrary& api = hwloc();
  ASSERT_NE(api.get_api_version, nullptr);
  EXPECT_EQ(api.get_api_version() >> 16, static_cast<unsigned>(HWLOC_API_VERSION) >> 16);
  EXPECT_EQ(&hwloc(), &api) << "loaded once";
}

}  // namespace
}  // namespace ddprun::launcher::detail
