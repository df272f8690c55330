// What the user sees of the workers' output, with the ddprun executable end
// to end: on a terminal (a pseudo-terminal this test opens and reads, made
// ddprun's controlling terminal as a shell would), the workers get terminals
// of their own (isatty(), the window size and its changes, line-buffered C
// stdio), '\r' progress lines are live, and lines never mix on the screen;
// with no terminal the workers keep pipes. And --duplicate-*-filters.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ddprun/launcher/process/subprocess.hpp"
#include "ddprun/test_support/files.hpp"
#include "ddprun/test_support/temp_dir.hpp"
#include "ddprun_binary_fixture.hpp"

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;
using test_support::readFile;
using testing::DdprunBinaryTest;
using testing::runDir;

// The lines a terminal would show for `bytes`: '\r' goes back to the first
// column, '\n' to a new line, "ESC[K" erases to the end of the line, other
// escape sequences (the log's colours) draw nothing.
std::vector<std::string> screenLines(std::string_view bytes) {
  std::vector<std::string> lines(1);
  std::size_t column = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    std::string& line = lines.back();
    if (c == '\r') {
      column = 0;
    } else if (c == '\n') {
      lines.emplace_back();
      column = 0;
    } else if (c == '\x1b' && i + 1 < bytes.size() && bytes[i + 1] == '[') {
      std::size_t end = i + 2;
      while (end < bytes.size() && !std::isalpha(static_cast<unsigned char>(bytes[end]))) {
        ++end;
      }
      if (end < bytes.size() && bytes[end] == 'K') {
        line.resize(std::min(line.size(), column));
      }
      i = end;
    } else {
      if (column < line.size()) {
        line[column] = c;
      } else {
        line.push_back(c);
      }
      ++column;
    }
  }
  return lines;
}

// The workers' lines on the screen: all but ddprun's own log lines.
std::vector<std::string> workerLines(std::string_view bytes) {
  std::vector<std::string> lines;
  for (std::string& line : screenLines(bytes)) {
    if (!line.empty() && line.rfind("[20", 0) != 0) {
      lines.push_back(std::move(line));
    }
  }
  return lines;
}

class DdprunConsoleTest : public ::testing::Test {
 protected:
  ~DdprunConsoleTest() override {
    if (master_ >= 0) {
      ::close(master_);
    }
  }

  // Starts ddprun with its stdout and stderr on a new pseudo-terminal of
  // `rows` x `cols`, its controlling terminal, passing bytes as written.
  Subprocess startOnTerminal(const std::vector<std::string>& args, unsigned short rows = 40,
                             unsigned short cols = 100) {
    winsize size{};
    size.ws_row = rows;
    size.ws_col = cols;
    int slave = -1;
    EXPECT_EQ(::openpty(&master_, &slave, nullptr, nullptr, &size), 0);
    termios settings{};
    ::tcgetattr(slave, &settings);
    settings.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    ::tcsetattr(slave, TCSANOW, &settings);
    Subprocess ddprun = start(args, slave, slave, slave);
    ::close(slave);
    return ddprun;
  }

  Subprocess start(const std::vector<std::string>& args, int out, int err, int terminal = -1) {
    SpawnOptions options;
    options.argv = {DDPRUN_BINARY};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    options.env = {{"PATH", "/usr/bin:/bin"}, {"TMPDIR", dir_.path().string()}};
    options.stdout_fd = out;
    options.stderr_fd = err;
    options.controlling_terminal_fd = terminal;
    return Subprocess(options);
  }

  // Reads the terminal until `text` has been shown, or `timeout`.
  bool readUntilShown(const std::string& text, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (transcript_.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !readSome(static_cast<int>(left.count()))) {
        return transcript_.find(text) != std::string::npos;
      }
    }
    return true;
  }

  // Reads until nothing holds the terminal any more (ddprun has ended), then
  // reaps ddprun; SIGKILLs it after `timeout`.
  ExitStatus readToEnd(Subprocess& ddprun, std::chrono::milliseconds timeout = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ADD_FAILURE() << "ddprun did not end; the terminal showed:\n" << transcript_;
        ddprun.signalGroup(SIGKILL);
        break;
      }
      if (!readSome(static_cast<int>(left.count()))) {
        break;
      }
    }
    return ddprun.wait();
  }

  // False at the end of the terminal (EIO: every slave closed) or timeout.
  bool readSome(int timeout_ms) {
    pollfd readable{master_, POLLIN, 0};
    if (::poll(&readable, 1, timeout_ms) <= 0) {
      return false;
    }
    char buffer[4096];
    const ssize_t got = ::read(master_, buffer, sizeof(buffer));
    if (got <= 0) {
      return false;
    }
    transcript_.append(buffer, static_cast<std::size_t>(got));
    return true;
  }

  void create(const std::filesystem::path& file) { std::ofstream{file}; }

  std::vector<std::string> workers(int nproc, std::vector<std::string> steps,
                                   std::vector<std::string> flags = {}) {
    std::vector<std::string> args = {"--standalone", "--nproc-per-node", std::to_string(nproc)};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--no-python", DDPRUN_TERMINAL_WORKER});
    args.insert(args.end(), steps.begin(), steps.end());
    return args;
  }

  test_support::TempDir dir_;
  int master_ = -1;
  std::string transcript_;
};

TEST_F(DdprunConsoleTest, WorkersSeeATerminalOfItsSizeExactlyWhenDdprunHasOne) {
  Subprocess on_terminal = startOnTerminal(workers(2, {"terminal"}), 37, 111);
  ASSERT_TRUE(readToEnd(on_terminal).success()) << transcript_;
  const auto shown = workerLines(transcript_);
  EXPECT_EQ(std::count(shown.begin(), shown.end(), "stdout tty=1 size=37x111"), 2) << transcript_;
  EXPECT_EQ(std::count(shown.begin(), shown.end(), "stderr tty=1 size=37x111"), 2) << transcript_;

  // A tee'd stream goes to its file too: a pipe, as with no terminal at all.
  transcript_.clear();
  Subprocess teed = startOnTerminal(
      workers(1, {"terminal"}, {"--log-dir", (dir_ / "logs").string(), "--tee", "1"}));
  ASSERT_TRUE(readToEnd(teed).success()) << transcript_;
  std::vector<std::string> lines = workerLines(transcript_);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"[default0]:stdout tty=0 size=0x0",
                                             "stderr tty=1 size=40x100"}))
      << transcript_;

  int ends[2];
  ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
  Subprocess on_pipe = start(workers(2, {"terminal"}), ends[1], ends[1]);
  ::close(ends[1]);
  std::string piped;
  char buffer[4096];
  for (ssize_t got; (got = ::read(ends[0], buffer, sizeof(buffer))) > 0;) {
    piped.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(ends[0]);
  ASSERT_TRUE(on_pipe.wait().success()) << piped;
  EXPECT_EQ(testing::countOf(piped, "stdout tty=0 size=0x0\n"), 2) << piped;
  EXPECT_EQ(testing::countOf(piped, "stderr tty=0 size=0x0\n"), 2) << piped;
}

// A worker's terminal is not its controlling one: a /dev/tty there would be
// a terminal nobody types into, where getpass() or a pager waits for ever.
// Without one, getpass() reads the inherited stdin, the user's.
TEST_F(DdprunConsoleTest, AWorkersDevTtyIsNeverATerminalNobodyTypesInto) {
  Subprocess ddprun = startOnTerminal(
      {"--standalone", "--nproc-per-node", "1", "--no-python", "/bin/sh", "-c",
       "if (exec 3<>/dev/tty) 2>/dev/null; then echo devtty=pty; else echo devtty=none; fi"});
  ASSERT_TRUE(readToEnd(ddprun).success()) << transcript_;
  EXPECT_EQ(workerLines(transcript_), std::vector<std::string>{"devtty=none"}) << transcript_;
}

// The worker waits, mid-line, for the test to have seen its progress.
TEST_F(DdprunConsoleTest, AProgressLineIsShownBeforeItEnds) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{}, {"--log-dir", (dir_ / "logs").string(), "--tee", "3"}}) {
    const auto seen = dir_ / ("seen" + std::to_string(flags.size()));
    const std::string prefix = flags.empty() ? "" : "[default0]:";
    transcript_.clear();
    Subprocess ddprun = startOnTerminal(workers(
        1, {"out:step 1 of 2\\r", "flush", "wait:" + seen.string(), "out:step 2 of 2\\rdone\\n"},
        flags));
    EXPECT_TRUE(readUntilShown(prefix + "step 1 of 2")) << transcript_;
    create(seen);
    ASSERT_TRUE(readToEnd(ddprun).success()) << transcript_;
    const auto lines = workerLines(transcript_);
    EXPECT_EQ(std::vector<std::string>{prefix + "done"}, lines) << transcript_;
  }
}

// printf without fflush: line buffered on a terminal, block buffered on a pipe.
TEST_F(DdprunConsoleTest, AProgramsCStdioLinesShowAsTheyAreWritten) {
  const auto seen = dir_ / "seen";
  Subprocess ddprun = startOnTerminal(
      workers(1, {"out:first line\\n", "wait:" + seen.string(), "out:second line\\n"}));
  EXPECT_TRUE(readUntilShown("first line\n")) << transcript_;
  create(seen);
  ASSERT_TRUE(readToEnd(ddprun).success()) << transcript_;
  EXPECT_NE(transcript_.find("second line\n"), std::string::npos) << transcript_;
}

// Rank 1 draws a live progress line while rank 0 writes lines in pieces:
// every line on the screen is one worker's whole line, none lost, rank 0's
// last one (no newline, completed at its end) included.
void expectWholeLines(const std::vector<std::string>& lines, const std::string& prefix0,
                      const std::string& prefix1, const std::string& transcript) {
  const std::regex chatter(prefix0 + R"(rank 0 line (\d+) end)");
  const std::regex step(prefix1 + R"(step (\d+) of 300 [#.]{30})");
  const std::regex note(prefix1 + R"(note \d+)");
  const std::regex last_words(prefix0 + "last words");
  std::set<int> chatter_lines;
  std::set<int> steps;
  int notes = 0;
  int last = 0;
  for (const std::string& line : lines) {
    std::smatch match;
    if (std::regex_match(line, match, chatter)) {
      chatter_lines.insert(std::stoi(match[1]));
    } else if (std::regex_match(line, match, step)) {
      steps.insert(std::stoi(match[1]));
    } else {
      notes += std::regex_match(line, note) ? 1 : 0;
      last += std::regex_match(line, last_words) ? 1 : 0;
      ASSERT_TRUE(std::regex_match(line, note) || std::regex_match(line, last_words))
          << "a mixed line: '" << line << "'; the terminal showed:\n"
          << transcript;
    }
  }
  EXPECT_EQ(chatter_lines.size(), 300u);
  EXPECT_EQ(notes, 30);
  EXPECT_EQ(last, 1);
  // What stays of the progress line: its state at each note.
  EXPECT_EQ(steps.size(), 30u);
  EXPECT_EQ(*steps.rbegin(), 300);
}

TEST_F(DdprunConsoleTest, LinesOfTwoWorkersNeverMixOnTheTerminalLiveLinesIncluded) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{}, {"--log-dir", (dir_ / "logs").string(), "--tee", "3"}}) {
    const auto go = dir_ / ("go" + std::to_string(flags.size()));
    transcript_.clear();
    Subprocess ddprun =
        startOnTerminal(workers(2,
                                {"1/out:\\rwaiting for rank 0", "1/flush", "wait:" + go.string(),
                                 "0/chatter:300", "1/progress:300", "0/out:last words"},
                                flags));
    EXPECT_TRUE(readUntilShown("waiting for rank 0")) << transcript_;
    create(go);
    ASSERT_TRUE(readToEnd(ddprun).success()) << transcript_;
    expectWholeLines(workerLines(transcript_), flags.empty() ? "" : R"(\[default0\]:)",
                     flags.empty() ? "" : R"(\[default1\]:)", transcript_);
  }
}

// TIOCSWINSZ on the terminal's master: the kernel sends SIGWINCH to ddprun,
// whose terminal it is, and ddprun resizes the workers' terminals.
TEST_F(DdprunConsoleTest, ResizingDdprunsTerminalResizesTheWorkers) {
  const auto done = dir_ / "done";
  Subprocess ddprun = startOnTerminal(workers(1, {"sizes-until:" + done.string()}), 40, 100);
  ASSERT_TRUE(readUntilShown("size 40x100/40x100\n")) << transcript_;
  winsize smaller{};
  smaller.ws_row = 25;
  smaller.ws_col = 80;
  ASSERT_EQ(::ioctl(master_, TIOCSWINSZ, &smaller), 0);
  EXPECT_TRUE(readUntilShown("size 25x80/25x80\n")) << transcript_;
  create(done);
  EXPECT_TRUE(readToEnd(ddprun).success()) << transcript_;
}

std::multiset<std::string> linesOf(const std::string& text) {
  std::multiset<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.insert(line);
  }
  return lines;
}

// Every stream is filtered, redirected (stdout here) or not; `,,` is a comma.
class DuplicateFiltersTest : public DdprunBinaryTest {};

TEST_F(DuplicateFiltersTest, MatchingLinesAreCopiedWithTheirPrefixPerAttempt) {
  const auto log_dir = dir_.path() / "logs";
  const std::string printed = (dir_.path() / "printed").string();
  std::vector<std::string> args = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "1"};
  args.insert(args.end(), {"--log-dir", log_dir.string(), "--redirects", "1"});
  args.insert(args.end(), {"--duplicate-stdout-filters", "keep,a,,b"});
  args.insert(args.end(), {"--duplicate-stderr-filters", "warn"});
  args.insert(args.end(), {"--no-python", DDPRUN_TERMINAL_WORKER});
  // Rank 1 fails the first attempt once rank 0 has written everything.
  args.insert(args.end(), {"out:keep this\\ndrop this\\nhas a,b in it\\nhas a b in it\\n",
                           "err:warn: one\\nnothing\\n", "flush", "0/touch:" + printed,
                           "1/wait:" + printed, "1/exit-if-attempt:0:3"});
  const testing::Outcome outcome = run(args);
  ASSERT_TRUE(outcome.status.success()) << outcome.stderr_text;
  for (const char* attempt : {"attempt_0", "attempt_1"}) {
    const auto dir = runDir(log_dir) / attempt;
    EXPECT_EQ(linesOf(readFile(dir / "filtered_stdout.log")),
              (std::multiset<std::string>{"[default0]:keep this", "[default0]:has a,b in it",
                                          "[default1]:keep this", "[default1]:has a,b in it"}))
        << dir;
    EXPECT_EQ(linesOf(readFile(dir / "filtered_stderr.log")),
              (std::multiset<std::string>{"[default0]:warn: one", "[default1]:warn: one"}))
        << dir;
  }
}

}  // namespace
}  // namespace ddprun::launcher
