#include "ddprun/launcher/output/console.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "ddprun/launcher/core/write_all.hpp"

namespace ddprun::launcher {
namespace {

// Back to the start of the line, and erase it to its end (ANSI "EL").
constexpr std::string_view kEraseLine = "\r\x1b[K";

// Two descriptors on the same terminal share one screen.
bool sameTerminal(int a, int b) {
  struct stat first {};
  struct stat second {};
  return ::fstat(a, &first) == 0 && ::fstat(b, &second) == 0 && first.st_rdev == second.st_rdev;
}

}  // namespace

std::optional<winsize> Console::windowSize() const {
  winsize size{};
  if (!terminal_ || ::ioctl(fd_, TIOCGWINSZ, &size) != 0) {
    return std::nullopt;
  }
  return size;
}

void Console::writeLine(const void* writer, std::string_view line) {
  if (!terminal_ || screen_->writer == nullptr) {
    writeAll(fd_, line);
    return;
  }
  // One write(): the erase, the line, and the other worker's live line again.
  std::string bytes(kEraseLine);
  bytes.append(line);
  if (screen_->writer == writer) {
    screen_->writer = nullptr;
    screen_->text.clear();
  } else {
    bytes.append(screen_->text);
  }
  writeAll(fd_, bytes);
}

void Console::showLive(const void* writer, std::string_view text) {
  if (!terminal_ || (screen_->writer == writer && screen_->text == text)) {
    return;
  }
  std::string bytes(kEraseLine);
  bytes.append(text);
  writeAll(fd_, bytes);
  screen_->writer = writer;
  screen_->text.assign(text);
}

Consoles consolesOfThisProcess() {
  const bool out_terminal = ::isatty(STDOUT_FILENO) == 1;
  const bool err_terminal = ::isatty(STDERR_FILENO) == 1;
  auto out_screen = std::make_shared<Console::Screen>();
  auto err_screen = out_terminal && err_terminal && sameTerminal(STDOUT_FILENO, STDERR_FILENO)
                        ? out_screen
                        : std::make_shared<Console::Screen>();
  return {Console(STDOUT_FILENO, out_terminal, std::move(out_screen)),
          Console(STDERR_FILENO, err_terminal, std::move(err_screen))};
}

}  // namespace ddprun::launcher
