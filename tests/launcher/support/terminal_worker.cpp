// A stand-in worker for the console tests, writing through C stdio (printf,
// no fflush unless told): its output reaches the agent as the C library's
// buffering decides, as any program's. Runs its arguments as steps, in order:
//   out:TEXT        printf TEXT to stdout ("\n" and "\r" in TEXT are escapes)
//   err:TEXT        the same to stderr
//   flush           fflush both
//   wait:FILE       wait until FILE exists (up to 30 s; then exit 3)
//   touch:FILE      create FILE
//   terminal        print "stdout tty=T size=RxC" to stdout and the same for
//                   stderr to stderr (T 0 or 1; RxC 0x0 when no terminal)
//   sizes-until:FILE  print "size RxC/RxC" (stdout's terminal, stderr's) now
//                   and after every SIGWINCH, until FILE exists
//   chatter:N       N lines "rank R line I end" to stdout, each in two
//                   write()s, so a relay that is not line-aware would mix them
//   progress:N      N updates "\rstep I of N ###..." (a 30-column bar) of one
//                   line, each one write() with no newline, a whole line
//                   "note I" after every tenth, a last newline unless a note ended it
//   exit-if-attempt:A:N  exit with N when TORCHELASTIC_RESTART_COUNT is A
// A step written R/STEP runs on local rank R only.
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace {

volatile std::sig_atomic_t resized = 0;

std::string envOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

std::string unescape(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == 'n' || text[i + 1] == 'r')) {
      out.push_back(text[++i] == 'n' ? '\n' : '\r');
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::string sizeOf(int fd) {
  winsize size{};
  if (::ioctl(fd, TIOCGWINSZ, &size) != 0) {
    return "0x0";
  }
  return std::to_string(size.ws_row) + "x" + std::to_string(size.ws_col);
}

// Polls: a helper may sleep; the tests that run it do not.
bool waitFor(const std::string& file) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(file)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void sizesUntil(const std::string& file) {
  struct sigaction action {};
  action.sa_handler = [](int) { resized = 1; };
  sigaction(SIGWINCH, &action, nullptr);
  std::printf("size %s/%s\n", sizeOf(STDOUT_FILENO).c_str(), sizeOf(STDERR_FILENO).c_str());
  std::fflush(stdout);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(file) && std::chrono::steady_clock::now() < deadline) {
    if (resized != 0) {
      resized = 0;
      std::printf("size %s/%s\n", sizeOf(STDOUT_FILENO).c_str(), sizeOf(STDERR_FILENO).c_str());
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void writeRaw(const std::string& text) {
  [[maybe_unused]] ssize_t written = ::write(STDOUT_FILENO, text.data(), text.size());
}

void chatter(int lines) {
  const std::string rank = envOr("LOCAL_RANK", "?");
  for (int i = 0; i < lines; ++i) {
    writeRaw("rank " + rank + " line " + std::to_string(i));
    writeRaw(" end\n");
  }
}

void progress(int steps) {
  constexpr int kBarWidth = 30;
  for (int i = 1; i <= steps; ++i) {
    const int done = i * kBarWidth / steps;
    writeRaw("\rstep " + std::to_string(i) + " of " + std::to_string(steps) + " " +
             std::string(static_cast<std::size_t>(done), '#') +
             std::string(static_cast<std::size_t>(kBarWidth - done), '.'));
    if (i % 10 == 0) {
      writeRaw("\nnote " + std::to_string(i) + "\n");
    }
  }
  if (steps % 10 != 0) {
    writeRaw("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string step = argv[i];
    if (const auto slash = step.find('/'); slash != std::string::npos && slash < step.find(':')) {
      if (step.substr(0, slash) != envOr("LOCAL_RANK", "?")) {
        continue;
      }
      step.erase(0, slash + 1);
    }
    const auto colon = step.find(':');
    const std::string verb = step.substr(0, colon);
    const std::string arg = colon == std::string::npos ? "" : step.substr(colon + 1);
    if (verb == "out") {
      std::printf("%s", unescape(arg).c_str());
    } else if (verb == "err") {
      std::fprintf(stderr, "%s", unescape(arg).c_str());
    } else if (verb == "flush") {
      std::fflush(stdout);
      std::fflush(stderr);
    } else if (verb == "wait" && !waitFor(arg)) {
      return 3;
    } else if (verb == "touch") {
      std::ofstream{arg};
    } else if (verb == "terminal") {
      std::printf("stdout tty=%d size=%s\n", isatty(STDOUT_FILENO), sizeOf(STDOUT_FILENO).c_str());
      std::fprintf(stderr, "stderr tty=%d size=%s\n", isatty(STDERR_FILENO),
                   sizeOf(STDERR_FILENO).c_str());
    } else if (verb == "sizes-until") {
      sizesUntil(arg);
    } else if (verb == "chatter") {
      chatter(std::stoi(arg));
    } else if (verb == "progress") {
      progress(std::stoi(arg));
    } else if (verb == "exit-if-attempt") {
      const auto at = arg.find(':');
      if (envOr("TORCHELASTIC_RESTART_COUNT", "0") == arg.substr(0, at)) {
        std::exit(std::stoi(arg.substr(at + 1)));  // exit() flushes stdio, as a program's end does
      }
    }
  }
  return 0;
}
