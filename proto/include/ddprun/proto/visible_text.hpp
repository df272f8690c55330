// ddprun's one rule for showing text it did not write: run ids, agent ids,
// host names, paths, failure reasons, a daemon's error text. It applies
// wherever such text meets a reader: `ddprun status`' output and tables,
// the log lines that quote it, and the label values of /metrics (whose
// Prometheus escaping comes on top). Pure functions; any thread.
//
// Escaped, so that no byte can move the cursor, recolour or retitle the
// terminal, forge a line, or reorder what is shown:
//   - `\` itself, as `\\` (so an escape read back is unambiguous, and two
//     different strings never show, or label a series, alike);
//   - C0 controls U+0000-U+001F (NUL, BEL, TAB, LF, CR, ESC, ...) and DEL,
//     as `\xNN`;
//   - C1 controls U+0080-U+009F, as `\uNNNN`;
//   - the bidirectional marks, embeddings, overrides and isolates (U+061C,
//     U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and the line and
//     paragraph separators (U+2028, U+2029), as `\uNNNN`;
//   - each byte of invalid UTF-8 (a stray continuation byte, a cut or
//     overlong sequence, a surrogate, past U+10FFFF), as `\xNN`.
// Hex digits are lower case. Everything else, printable ASCII and valid
// UTF-8 alike, is left as it is; the result is valid UTF-8 with no control
// character in it.
#pragma once

#include <string>
#include <string_view>

namespace ddprun::proto {

std::string visible(std::string_view text);

}  // namespace ddprun::proto
