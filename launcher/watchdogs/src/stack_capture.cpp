#include "stack_capture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/process/executable_path.hpp"
#include "ddprun/launcher/watchdogs/python_stacks.hpp"

namespace ddprun::launcher {
namespace {

namespace asio = net::asio;

constexpr std::size_t kMaxToolOutput = 256 * 1024;

std::string shellWords(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& word : argv) {
    if (!text.empty()) {
      text += ' ';
    }
    text += word.find(' ') == std::string::npos ? word : "'" + word + "'";
  }
  return text;
}

}  // namespace

// One tool's run: its process, its output pipe and its deadline.
struct StackCapture::Run {
  Run(asio::io_context& io, Subprocess child, int output_fd)
      : process(std::move(child)), output(io, output_fd), deadline(io) {}
  Subprocess process;
  asio::posix::stream_descriptor output;
  asio::steady_timer deadline;
  std::array<char, 8192> buffer{};
  std::string text;
  bool cut_off = false;
};

StackCapture::StackCapture(asio::io_context& io, std::string path_variable,
                           std::chrono::milliseconds per_tool)
    : io_(io), path_variable_(std::move(path_variable)), per_tool_(per_tool) {}

StackCapture::~StackCapture() {
  // Asio's timer reports a failed cancel by throwing, and a destructor must
  // not let that out: said, and the tool still killed with its Subprocess.
  try {
    cancel();
  } catch (const std::exception& error) {
    log().warn("stack capture: cancelling it failed: {}", error.what());
  }
}

std::vector<std::vector<std::string>> StackCapture::commandsFor(pid_t pid) const {
  std::vector<std::vector<std::string>> commands;
  const std::string target = std::to_string(pid);
  if (isPythonProcess(pid)) {
    if (auto py_spy = findExecutable("py-spy", path_variable_)) {
      commands.push_back({*py_spy, "dump", "--pid", target});
    }
  }
  // eu-stack reads every thread's native frames in tens of milliseconds
  // where gdb takes seconds on a process that loaded LibTorch (it reads
  // every library's symbols first): the stacks come before the kill, and a
  // hung group should not wait for them.
  if (auto eu_stack = findExecutable("eu-stack", path_variable_)) {
    commands.push_back({*eu_stack, "-p", target});
  } else if (auto gdb = findExecutable("gdb", path_variable_)) {
    commands.push_back({*gdb, "-nx", "-batch", "-iex", "set debuginfod enabled off", "-ex",
                        "set pagination off", "-p", target, "-ex", "thread apply all bt"});
  }
  return commands;
}

bool StackCapture::capture(pid_t pid, Done done) {
  if (busy()) {
    return false;
  }
  pending_ = commandsFor(pid);
  text_.clear();
  done_ = std::move(done);
  if (pending_.empty()) {
    text_ = isPythonProcess(pid) ? "no stack: neither py-spy, eu-stack nor gdb is on PATH\n"
                                 : "no stack: neither eu-stack nor gdb is on PATH\n";
  }
  asio::post(io_, [this, generation = ++generation_] { startNext(generation); });
  return true;
}

void StackCapture::startNext(unsigned generation) {
  if (generation != generation_ || !done_) {
    return;  // cancelled meanwhile
  }
  if (pending_.empty()) {
    auto done = std::move(done_);
    done_ = nullptr;  // no longer busy: `done` may start the next capture
    done(std::move(text_));
    return;
  }
  const std::vector<std::string> argv = std::move(pending_.front());
  pending_.erase(pending_.begin());
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    text_ += "$ " + shellWords(argv) + "\n(cannot create a pipe)\n";
    startNext(generation);
    return;
  }
  SpawnOptions options;
  options.argv = argv;
  options.env = inheritedEnvironment();
  options.stdout_fd = ends[1];
  options.stderr_fd = ends[1];
  try {
    Subprocess child(options);
    ::close(ends[1]);
    running_ = std::make_unique<Run>(io_, std::move(child), ends[0]);
  } catch (const SpawnError& error) {
    ::close(ends[0]);
    ::close(ends[1]);
    text_ += "$ " + shellWords(argv) + "\n(" + error.what() + ")\n";
    startNext(generation);
    return;
  }
  text_ += "$ " + shellWords(argv) + "\n";
  Run& run = *running_;
  run.deadline.expires_after(per_tool_);
  run.deadline.async_wait([this, &run](const net::error_code& error) {
    if (!error && running_.get() == &run) {
      run.cut_off = true;
      run.process.signalGroup(SIGKILL);  // its output then ends
    }
  });
  readMore();
}

void StackCapture::readMore() {
  Run& run = *running_;
  run.output.async_read_some(
      asio::buffer(run.buffer), [this, &run](const net::error_code& error, std::size_t bytes) {
        if (error == asio::error::operation_aborted || running_.get() != &run) {
          return;  // cancel()
        }
        if (error) {
          finishRun();  // end of output: the tool exited or was killed
          return;
        }
        if (run.text.size() < kMaxToolOutput) {
          run.text.append(run.buffer.data(), std::min(bytes, kMaxToolOutput - run.text.size()));
        }
        readMore();
      });
}

void StackCapture::finishRun() {
  Run& run = *running_;
  run.deadline.cancel();
  // Its output has ended: it is exiting, or a child of it holds the pipe.
  if (!run.process.waitFor(std::chrono::seconds(1))) {
    run.process.signalGroup(SIGKILL);
    run.process.wait();
  }
  text_ += run.text;
  if (!run.text.empty() && run.text.back() != '\n') {
    text_ += '\n';
  }
  if (run.cut_off) {
    text_ += "(cut off after " + std::to_string(per_tool_.count() / 1000) + " s)\n";
  }
  auto finished = std::move(running_);
  asio::post(
      io_, [this, generation = generation_, finished = std::shared_ptr<Run>(std::move(finished))] {
        startNext(generation);
      });
}

void StackCapture::cancel() {
  ++generation_;
  pending_.clear();
  done_ = nullptr;
  if (running_) {
    net::error_code ignored;
    running_->deadline.cancel();
    running_->output.close(ignored);
    running_->process.signalGroup(SIGKILL);
    running_.reset();  // Subprocess's destructor kills and reaps
  }
}

}  // namespace ddprun::launcher
