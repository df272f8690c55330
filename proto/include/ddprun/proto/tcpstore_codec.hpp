// Incremental encoder and decoder for TCPStore requests, and the primitive
// writer used for replies. No I/O and no threads: callers own the buffers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ddprun/proto/tcpstore_wire.hpp"

namespace ddprun::proto {

// One decoded request. The string_views point into the decoder's input and
// stay valid only until the caller discards those bytes.
struct Request {
  Command command = Command::GetNumKeys;
  std::vector<std::string_view> keys;  // the key, a key list, or MULTI_SET's keys
  std::vector<std::string_view>
      values;  // value(s): SET/APPEND/QUEUE_PUSH data, CAS expected+desired, MULTI_SET values
  std::int64_t number = 0;  // ADD delta
  std::uint32_t word = 0;   // VALIDATE magic, PING nonce

  void clear();
};

enum class DecodeStatus : std::uint8_t { Complete, NeedMore, Bad };

struct DecodeResult {
  DecodeStatus status = DecodeStatus::NeedMore;
  // Complete: bytes consumed. NeedMore: a lower bound on the request's total
  // size (never above Limits::max_request_bytes). Bad: 0.
  std::size_t size = 0;
  std::string
      error;  // Bad only: what was wrong, e.g. "a key of 9000 bytes, over the 8192-byte limit"
};

// Decodes one connection's request stream. The first call decides the dialect
// from the first bytes: 00 CE F7 85 3C is a 2.2+ VALIDATE, anything else is
// the configured legacy dialect (1.13 by default). One per connection, used
// by one thread at a time.
//
// After NeedMore, the next call is expected to pass the same request again
// from its first byte, with what arrived since appended (the buffer may have
// moved): the decoder resumes where it stopped, so a request costs time in
// proportion to its size however its bytes are split. Input shorter than
// what was already read, or starting with another command byte, is decoded
// from the start.
class RequestDecoder {
 public:
  explicit RequestDecoder(Limits limits = {}, Dialect legacy_dialect = Dialect::Legacy113);

  // Decodes the request at the front of `input` into `out`. Never allocates
  // more than the limits allow, whatever the input claims. `out` holds the
  // request only after Complete.
  DecodeResult decode(std::string_view input, Request& out);

  Dialect dialect() const { return dialect_; }
  const Limits& limits() const { return limits_; }

  // Wire fields (counts, lengths, fixed-size numbers) read since
  // construction, each time it was read: the decoder's work, which the tests
  // bound to prove decoding linear.
  std::uint64_t fieldsRead() const { return fields_read_; }

  // How far the decoding of an incomplete request got: everything before
  // `position` has been read and checked. The decoder's own state.
  struct Progress {
    bool under_way = false;
    Command command = Command::GetNumKeys;
    std::uint8_t command_byte = 0;
    std::size_t position = 1;    // past the command byte, whole fields and whole list items
    std::uint8_t field = 0;      // the layout field `position` is in
    bool counted = false;        // that field is a list whose count has been read
    std::size_t items_left = 0;  // the list's items not yet read
  };

 private:
  DecodeResult detectDialect(std::string_view input);
  DecodeResult resume(std::string_view input, Request& out);
  DecodeResult complete(std::size_t size);
  DecodeResult stopped(DecodeResult result);

  Limits limits_;
  Dialect legacy_dialect_;
  Dialect dialect_ = Dialect::Undecided;
  bool first_request_ = true;
  Progress progress_;
  std::uint64_t fields_read_ = 0;
};

// Appends wire primitives (little-endian, u64 length prefixes) to a string.
class WireWriter {
 public:
  explicit WireWriter(std::string& out) : out_(out) {}

  void u8(std::uint8_t value) { out_.push_back(static_cast<char>(value)); }
  void u32(std::uint32_t value);
  void i64(std::int64_t value);
  void u64(std::uint64_t value);
  void bytes(std::string_view value);
  void keyList(std::span<const std::string_view> keys);

 private:
  std::string& out_;
};

// A request from its parts; the views must outlive it.
Request makeRequest(Command command, std::vector<std::string_view> keys = {},
                    std::vector<std::string_view> values = {}, std::int64_t number = 0,
                    std::uint32_t word = 0);

// Appends `request` as `dialect` sends it. Throws std::invalid_argument when
// the dialect has no byte for the command (e.g. PING in 1.13).
void encodeRequest(Dialect dialect, const Request& request, std::string& out);
std::string encodeRequest(Dialect dialect, const Request& request);

}  // namespace ddprun::proto
