// Relays one worker stream (stdout or stderr) from its pipe or the master of
// its pseudo-terminal: each chunk goes verbatim to the log file, if any; each
// *whole line* goes to the console, if any, with the prefix, in one write(),
// so lines from different workers never interleave mid-line, and to the
// filtered file when it matches a filter. On a terminal console a line the
// worker rewrites with '\r' (a progress bar) is shown live, as it changes
// (console.hpp). A line still open at end of stream is completed with a
// newline.
//
// Runs on the agent's io_context thread; owns the source's descriptor and the
// log file's; shares the filtered file; borrows the console. Kept alive by its
// own pending read until end of stream (a pipe's EOF; EIO from a pty master
// once every slave is closed) or stop().
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ddprun/launcher/core/owned_fd.hpp"
#include "ddprun/launcher/core/worker_output.hpp"
#include "ddprun/launcher/output/console.hpp"
#include "ddprun/net/asio.hpp"

namespace ddprun::launcher {

class LineRelay : public std::enable_shared_from_this<LineRelay> {
 public:
  struct Sinks {
    Console* console = nullptr;  // null: not shown
    std::string prefix;          // before each console line
    int file_fd = -1;            // raw copy, owned; -1: none
    std::vector<std::string> filters;
    std::shared_ptr<OwnedFd> filtered;  // the attempt's filtered file; null: none
    std::string filtered_prefix;
  };

  // Takes ownership of source_fd. on_finished runs once, at end of stream or
  // stop(); on_output (if set) on every chunk read.
  LineRelay(net::asio::io_context& io, int source_fd, Sinks sinks,
            std::function<void()> on_finished, std::function<void()> on_output = {});
  ~LineRelay();

  void start();
  // Flushes a partial line and stops reading.
  void stop();
  bool finished() const { return finished_; }
  int sourceFd() { return source_.native_handle(); }

 private:
  void read();
  void onData(std::size_t bytes);
  void onLine(std::string_view line);
  void capPartialLine();
  void finish();

  net::asio::posix::stream_descriptor source_;
  Sinks sinks_;
  std::array<char, 16 * 1024> buffer_{};
  std::string partial_;  // the current line, not yet ended
  std::function<void()> on_finished_;
  std::function<void()> on_output_;
  bool finished_ = false;
};

// Where one worker stream goes, as WorkerOutput says.
struct StreamRoute {
  bool to_console = true;
  std::string prefix;
  std::string file;  // empty: none
  bool may_be_terminal = false;
  LineFilter filter;
};

// The worker's end of a relayed stream, and whether it is a terminal.
struct WorkerEnd {
  OwnedFd fd;
  bool terminal = false;
};

// Every relay of one agent's workers, and ddprun's consoles. Opens each
// stream's log file (creating its directory) and the attempts' filtered
// files (shared by the streams that name the same one), resizes the
// workers' terminals with ddprun's own (SIGWINCH), and, once the workers are
// gone, gives the streams a child of a worker still holds open half a second
// before cutting them, so the agent's loop can end. Runs on the agent's
// io_context thread.
class WorkerRelays {
 public:
  // Runs once the workers' terminals have taken a new size of ddprun's:
  // the agent tells the workers (SIGWINCH), whose terminals are not their
  // controlling ones.
  void onResized(std::function<void()> resized) { on_resized_ = std::move(resized); }
  explicit WorkerRelays(net::asio::io_context& io);

  // A new stream relayed as `route` says to `console` (ddprun's stdout or
  // stderr); returns the worker's end. A pseudo-terminal when the route
  // allows one and the console is a terminal (and the system has one to
  // give), else a pipe. `on_output` (if
  // set) hears of every chunk (the hang watch's "no output"). Throws
  // SpawnError if neither can be made.
  WorkerEnd open(Console& console, const StreamRoute& route, std::function<void()> on_output = {});
  Console& stdoutConsole() { return consoles_.out; }
  Console& stderrConsole() { return consoles_.err; }
  // The workers have exited: streams still open get 500 ms, then are cut.
  void drain();

 private:
  struct Pty {
    std::shared_ptr<LineRelay> relay;
    Console* console;
  };

  std::shared_ptr<LineRelay> relay(int source_fd, Console& console, const StreamRoute& route,
                                   std::function<void()> on_output);
  std::shared_ptr<OwnedFd> filteredFile(const std::string& path);
  void watchResizes();
  void awaitResize();

  net::asio::io_context& io_;
  Consoles consoles_;
  net::asio::steady_timer drain_;
  net::asio::signal_set resizes_;  // SIGWINCH, once a worker has a pty
  bool watching_resizes_ = false;
  std::function<void()> on_resized_;
  bool no_ptys_ = false;  // one could not be had: pipes from then on
  std::vector<std::shared_ptr<LineRelay>> relays_;
  std::vector<Pty> ptys_;
  std::map<std::string, std::weak_ptr<OwnedFd>> filtered_files_;
  int open_ = 0;  // relays not yet at end of stream
  bool draining_ = false;
};

}  // namespace ddprun::launcher
