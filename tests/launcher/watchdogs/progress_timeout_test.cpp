// --progress-timeout's values: a fixed number of seconds, or auto learning
// from the intervals seen, with its floor and its longer first step.
#include "ddprun/launcher/core/progress_timeout.hpp"

#include <gtest/gtest.h>

#include "ddprun/proto/errors.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

TEST(ProgressTimeoutTest, SecondsAreFixed) {
  ProgressTimeout timeout = parseProgressTimeout("--progress-timeout", "2.5");
  EXPECT_TRUE(timeout.enabled());
  EXPECT_FALSE(timeout.isAutomatic());
  timeout.intervalSeen(10s);
  EXPECT_EQ(timeout.after(1), 2500ms);
  EXPECT_EQ(timeout.after(9), 2500ms);
  EXPECT_EQ(timeout.describe(9), "2.5 s");
}

TEST(ProgressTimeoutTest, AutoIsFiveTimesTheLongestIntervalAboveItsFloor) {
  ProgressTimeout timeout = parseProgressTimeout("--progress-timeout", "auto:2");
  EXPECT_TRUE(timeout.isAutomatic());
  EXPECT_EQ(timeout.after(2), 2s) << "nothing seen yet: the floor";
  EXPECT_EQ(timeout.after(1), 20s) << "the first step: ten times that";
  timeout.intervalSeen(100ms);
  EXPECT_EQ(timeout.after(2), 2s) << "5 x 0.1 s is under the floor";
  timeout.intervalSeen(3s);
  timeout.intervalSeen(1s);
  EXPECT_EQ(timeout.after(2), 15s);
  EXPECT_EQ(timeout.after(1), 150s);
  EXPECT_EQ(timeout.describe(2), "auto: 15 s (5 × the longest interval seen, 3 s, at least 2 s)");
  EXPECT_EQ(parseProgressTimeout("x", "auto").after(2), 60s) << "the default floor";
}

TEST(ProgressTimeoutTest, BadValuesNameTheFlagAndWhy) {
  for (const char* bad :
       {"", "0", "-1", "x", "1s", "nan", "inf", "auto:", "auto:0", "auto2", "automatic"}) {
    try {
      parseProgressTimeout("--progress-timeout", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find("--progress-timeout '"), std::string::npos)
          << error.what();
    }
  }
}

}  // namespace
}  // namespace ddprun::launcher
