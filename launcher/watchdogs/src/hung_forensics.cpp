#include "hung_forensics.hpp"

#include <filesystem>
#include <fstream>

#include "ddprun/launcher/core/log.hpp"
#include "stack_capture.hpp"

namespace ddprun::launcher {

HungForensics::HungForensics(net::asio::io_context& io, std::string path_variable)
    : io_(io), path_variable_(std::move(path_variable)) {}

HungForensics::~HungForensics() {
  // Asio's timers report a failed cancel by throwing, and a destructor must
  // not let that out: said, and each tool still killed with its Subprocess.
  try {
    cancel();
  } catch (const std::exception& error) {
    log().warn("stack capture: cancelling it failed: {}", error.what());
  }
}

bool HungForensics::capture(std::vector<Target> targets, Done done) {
  if (busy()) {
    return false;
  }
  cancel();
  done_ = std::move(done);
  pending_ = targets.size();
  for (std::size_t slot = 0; slot < targets.size(); ++slot) {
    const Target& target = targets[slot];
    Stacks stacks{target.index, target.pid, {}, {}};
    if (!target.error_file.empty()) {
      stacks.file = (std::filesystem::path(target.error_file).parent_path() / "stack.txt").string();
    }
    stacks_.push_back(std::move(stacks));
    captures_.push_back(std::make_unique<StackCapture>(io_, path_variable_));
    captures_.back()->capture(target.pid,
                              [this, slot](std::string text) { captured(slot, std::move(text)); });
  }
  if (targets.empty()) {
    auto finished = std::move(done_);
    done_ = nullptr;
    finished({});
  }
  return true;
}

void HungForensics::captured(std::size_t slot, std::string text) {
  Stacks& stacks = stacks_.at(slot);
  stacks.text = std::move(text);
  if (!stacks.file.empty()) {
    std::ofstream out(stacks.file);
    out << stacks.text;
    if (!out) {
      stacks.file.clear();  // the report then shows it instead of naming it
    }
  }
  if (--pending_ > 0 || !done_) {
    return;
  }
  auto finished = std::move(done_);
  done_ = nullptr;
  // The captures that called back are still on the stack: freed later.
  std::vector<Stacks> all = std::move(stacks_);
  stacks_.clear();
  finished(std::move(all));
}

void HungForensics::cancel() {
  done_ = nullptr;
  for (auto& capture : captures_) {
    capture->cancel();
  }
  captures_.clear();
  stacks_.clear();
  pending_ = 0;
}

}  // namespace ddprun::launcher
