// Parsers for the typed values of torchrun's options, one per value syntax.
// Pure functions; each throws ddprun::ConfigError with one line
// "<what> '<text>': <why>", where <what> names the flag (or the PET_ variable
// and its flag) so the user knows which input to fix.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ddprun/launcher/core/launch_config.hpp"

namespace ddprun::launcher {

// Throws ConfigError("<what> '<text>': <why>").
[[noreturn]] void failValue(std::string_view what, std::string_view text, std::string_view why);

// A decimal integer (optional sign) within [min, max].
int parseInt(std::string_view what, std::string_view text, int min, int max);

// A finite decimal floating-point number > 0.
double parsePositiveDouble(std::string_view what, std::string_view text);

// A finite decimal floating-point number >= 0.
double parseNonNegativeDouble(std::string_view what, std::string_view text);

// check_env semantics: an integer, non-zero = true (Python int() also allows
// surrounding blanks and a sign).
bool parseEnvBool(std::string_view what, std::string_view text);

// --nnodes: "N" or "MIN:MAX" with 0 < MIN <= MAX.
std::pair<int, int> parseNnodes(std::string_view what, std::string_view text);

// --nproc-per-node: a positive int or cpu|gpu|auto; xpu is refused saying why.
NprocPerNode parseNprocPerNode(std::string_view what, std::string_view text);

// -r/-t: "0".."3", or "i:v,..." with single-digit local ranks (torchrun's regex).
StdSpec parseStdSpec(std::string_view what, std::string_view text);

// --rdzv-conf: "k=v,..." split on ',' then the first '='; keys and values
// trimmed; an empty key or value is an error; a repeated key keeps the last.
std::map<std::string, std::string> parseRdzvConf(std::string_view what, std::string_view text);

// docs/torchrun-contract.md §3.6: "[v6]", "[v6]:port", else split on the last ':'; port 1-5 digits
// < 65536; host of [A-Za-z0-9_.:-]; empty means localhost:<default_port>.
// default_port < 0 means "no default": the caller decides what a missing port
// means (returned as port -1).
Endpoint parseEndpoint(std::string_view what, std::string_view text, int default_port);

// "host:port", or "[v6]:port" for an IPv6 address: how a user writes it.
std::string formatEndpoint(std::string_view host, int port);

// "30 s", "1.5 s": a timeout as the log and the report say it.
std::string formatSeconds(std::chrono::milliseconds duration);

// --signals-to-handle: comma list of signal names (SIGTERM, SIGUSR1, ...),
// blanks around names ignored; unknown names and SIGKILL/SIGSTOP are errors.
std::vector<int> parseSignals(std::string_view what, std::string_view text);

// --local-ranks-filter, --ranks-filter: comma list of ints >= 0; "" means
// all (nullopt upstream). `ranks_named` names them in the error ("local ranks", "ranks").
std::set<int> parseRankList(std::string_view what, std::string_view text,
                            std::string_view ranks_named = "local ranks");

// --duplicate-*-filters: comma list, ",," is a literal comma, empty items dropped.
std::vector<std::string> parseFilterList(std::string_view text);

// --start-method and --numa-binding choices.
StartMethod parseStartMethod(std::string_view what, std::string_view text);
NumaBinding parseNumaBinding(std::string_view what, std::string_view text);
// The value --numa-binding takes for `binding`: parseNumaBinding's inverse.
std::string_view numaBindingName(NumaBinding binding);

}  // namespace ddprun::launcher
