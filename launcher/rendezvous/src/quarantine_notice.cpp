// The quarantine of this agent's host (the rendezvous' rules:
// rendezvous/include/ddprun/rendezvous/elastic_rendezvous.hpp), as every
// backend says it (quarantine_notice.hpp), and ElasticMembership's part:
// the reader thread records the event (elastic_membership.cpp) and calls
// sayQuarantined() without mutex_ held.
#include "ddprun/launcher/rendezvous/quarantine_notice.hpp"

#include <ctime>

#include "ddprun/launcher/core/log.hpp"
#include "ddprun/launcher/rendezvous/elastic_membership.hpp"
#include "ddprun/launcher/rendezvous/wait_notice.hpp"
#include "ddprun/proto/visible_text.hpp"

namespace ddprun::launcher {
namespace {

namespace protocol = proto::rendezvous;

// When the quarantine ends by this host's wall clock, for the person who
// reads the log (the rendezvous sent a duration: no clocks are compared).
std::string localTime(std::chrono::system_clock::time_point when) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32] = {};
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

}  // namespace

void sayQuarantined(const QuarantineNotice& notice, std::string_view rendezvous, int min_nodes) {
  log().warn(
      "this host ({}) is quarantined by {}: {} group failure(s) started here first "
      "(--rdzv-conf quarantine_after); it stands by as a spare until {} ({} from now), unless "
      "the job needs it to keep {} node(s)",
      proto::visible(notice.host), rendezvous, notice.failures,
      localTime(std::chrono::system_clock::now() + notice.left), describeSeconds(notice.left),
      min_nodes);
}

int endedQuarantined() {
  log().error(
      "the job ended without this node: the rendezvous quarantined this host after group "
      "failures that started here; exit status {} (this node is unfit), not the job's",
      kUnfitExitCode);
  return kUnfitExitCode;
}

void ElasticMembership::sayQuarantined(const protocol::HostQuarantine& quarantine) {
  const QuarantineNotice notice{quarantine.host, quarantine.failures,
                                std::chrono::milliseconds(quarantine.left_ms)};
  launcher::sayQuarantined(notice, "rendezvous '" + proto::visible(options_.run_id) + "'",
                           options_.min_nodes);
  std::lock_guard lock(quarantine_watch_mutex_);
  if (quarantine_watch_) {
    quarantine_watch_(notice);
  }
}

std::string ElasticMembership::quarantineLeft() const {
  const auto& [quarantine, told] = *quarantine_;
  const auto since = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - told);
  return describeSeconds(std::max(std::chrono::milliseconds(0),
                                  std::chrono::milliseconds(quarantine.left_ms) - since));
}

bool ElasticMembership::leftOutByQuarantine() {
  std::lock_guard lock(mutex_);
  return left_out_;
}

void ElasticMembership::watchQuarantine(std::function<void(const QuarantineNotice&)> told) {
  std::lock_guard lock(quarantine_watch_mutex_);
  quarantine_watch_ = std::move(told);
}

}  // namespace ddprun::launcher
