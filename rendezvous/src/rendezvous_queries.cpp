// The read-only questions the rendezvous answers (GETs of
// "ddprun/query/<question>"): computed under the store lock from what the
// service holds, never stored, so asking changes nothing an agent sees.
#include <nlohmann/json.hpp>

#include "ddprun/rendezvous/rendezvous_service.hpp"

namespace ddprun::rdzv {
namespace {

namespace protocol = proto::rendezvous;

std::string errorAnswer(std::string why) {
  return nlohmann::json{{"error", std::move(why)}}.dump();
}

}  // namespace

std::string RendezvousService::answer(std::string_view key, Clock::time_point now) const {
  const std::string_view question = protocol::queryOf(key);
  if (question == protocol::kQueryClock) {
    return nlohmann::json{
        {"steady_ns",
         std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()}}
        .dump();
  }
  return errorAnswer("no such question: '" + std::string(question) + "'");
}

}  // namespace ddprun::rdzv
