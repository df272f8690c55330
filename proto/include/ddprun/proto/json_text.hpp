// The compact text of a JSON value, as every rendezvous message and answer
// is sent. Header-only; no state, any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ddprun::proto {

// Strings in these messages come from clients (run ids, agent ids, questions)
// and may hold invalid UTF-8. nlohmann's default dump() throws on that; a
// throw on the daemon's I/O thread would end the daemon, so invalid
// sequences are written as U+FFFD instead.
inline std::string jsonText(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ddprun::proto
