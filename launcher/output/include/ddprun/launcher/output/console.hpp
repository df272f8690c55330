// Where the workers' lines reach the user: one Console per descriptor of
// ddprun's own (its stdout, its stderr), shared by every relay that writes
// to that descriptor.
//
// A console on a terminal can show one *live line*: a line a worker keeps
// rewriting with '\r' (a progress bar), drawn as it changes rather than when
// it ends. The console knows whether one is on the screen, so before another
// whole line it erases it ("\r" + "ESC[K") and after that line it redraws
// it: lines never mix on the screen, live or not. Two consoles on the same
// terminal (ddprun's stdout and stderr usually are) share that knowledge,
// since they share the screen. ANSI sequences go to terminals only; to
// anything else (a file, a pipe) whole lines go as they are, in one write()
// each, and no line is live.
//
// Borrows its descriptor. Runs on the agent's io_context thread, as every
// relay does.
#pragma once

#include <sys/ioctl.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ddprun::launcher {

class Console {
 public:
  // The live line on a terminal's screen; shared by the consoles on it.
  struct Screen {
    const void* writer = nullptr;  // whose live line is on the screen; null: none
    std::string text;              // as drawn, prefix included
  };

  Console(int fd, bool terminal, std::shared_ptr<Screen> screen)
      : fd_(fd), terminal_(terminal), screen_(std::move(screen)) {}

  int fd() const { return fd_; }
  bool isTerminal() const { return terminal_; }
  // The terminal's size now; nullopt when this is no terminal.
  std::optional<winsize> windowSize() const;

  // A whole line ('\n'-ended) of `writer` (a relay). A live line of the same
  // writer is over: this line takes its place.
  void writeLine(const void* writer, std::string_view line);
  // Draws `text` (no '\n') as `writer`'s live line, in place of whatever
  // live line is on the screen. Terminals only.
  void showLive(const void* writer, std::string_view text);

 private:
  int fd_;
  bool terminal_;
  std::shared_ptr<Screen> screen_;
};

// ddprun's own stdout and stderr, as consoles.
struct Consoles {
  Console out;
  Console err;
};
Consoles consolesOfThisProcess();

}  // namespace ddprun::launcher
