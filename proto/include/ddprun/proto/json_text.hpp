// The text of a JSON value holding strings from outside (run ids, agent ids,
// questions, workers' events): every rendezvous message and answer, and the
// launcher's JSON files and outputs. Header-only; no state, any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ddprun::proto {

// Such strings may hold invalid UTF-8. nlohmann's default dump() throws on
// that; a throw on the daemon's I/O thread would end the daemon, in the agent
// its run, so invalid sequences are written as U+FFFD instead. `indent`: -1
// compact, else spaces per level; json and ordered_json alike.
namespace detail {
template <class Json>
std::string replacingDump(const Json& value, int indent) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}
}  // namespace detail

inline std::string jsonText(const nlohmann::json& value, int indent = -1) {
  return detail::replacingDump(value, indent);
}
inline std::string jsonText(const nlohmann::ordered_json& value, int indent = -1) {
  return detail::replacingDump(value, indent);
}

}  // namespace ddprun::proto
