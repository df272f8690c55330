// The one way JSON from outside (workers' events and error files, timer
// requests, `ddprun timeline`'s inputs, rendezvous requests and answers,
// etcd's gateway) is parsed: nesting is bounded while the text is read.
// Header-only; no state, any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ddprun::proto {

// The deepest nesting of arrays and objects accepted: `[]` and `{}` are 1,
// `[{}]` is 2, a scalar 0. nlohmann's copy, dump() and comparison recurse
// once per level, so a line of 50,000 "[" ends the process that copies or
// writes it out; Python's json (what reads the files ddprun writes) stops at
// about 1,000 levels.
inline constexpr int kMaxJsonDepth = 64;

// What `why` says of text that is no JSON at all (as opposed to too deep).
inline constexpr std::string_view kNotJson = "not valid JSON";

// The value of `text`, or a discarded value (is_discarded()) when `text` is
// not one whole JSON value or nests deeper than `max_depth`; then `why`,
// when given, says which (kNotJson, "nested deeper than 64 levels").
//
// The bound holds while parsing, not after: nlohmann's parser is iterative,
// and the callback refuses each array or object that would open beyond the
// bound, so nothing is built inside it (the DOM builder keeps a discarded
// container's children out too), and once one is refused nothing more is
// kept at all. What deep text costs is one scan of it, never a deep value.
template <class Json = nlohmann::json>
Json parseJson(std::string_view text, std::string* why = nullptr, int max_depth = kMaxJsonDepth) {
  bool too_deep = false;
  // `depth`: the arrays and objects already open around this event.
  const auto within_bound = [&too_deep, max_depth](int depth, typename Json::parse_event_t event,
                                                   Json& /*parsed*/) {
    const bool opens =
        event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    if (opens && depth >= max_depth) {
      too_deep = true;
    }
    return !too_deep;
  };
  Json value = Json::parse(text, within_bound, /*allow_exceptions=*/false);
  if (too_deep) {
    value = Json(Json::value_t::discarded);
    if (why != nullptr) {
      *why = "nested deeper than " + std::to_string(max_depth) + " levels";
    }
  } else if (value.is_discarded() && why != nullptr) {
    *why = kNotJson;
  }
  return value;
}

}  // namespace ddprun::proto
