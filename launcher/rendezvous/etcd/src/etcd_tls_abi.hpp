// The C interface between ddprun and its etcd TLS module
// (ddprun-etcd-tls.so, built from tls/): the one place OpenSSL is linked,
// loaded with dlopen only when an etcd rendezvous asks for protocol=https.
//
// Only C types cross it. ddprun links its C++ runtime statically and the
// module links its own, so no C++ object, allocation or exception may pass
// from one to the other: text goes in as pointers and sizes, comes back
// through a sink the caller gives, and a failure is a status with its line
// in a DdprunEtcdTlsError. Deadlines are steady_clock (CLOCK_MONOTONIC)
// nanoseconds. A connection is used by one thread at a time, except abort().
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// The module's answer: kDdprunEtcdTlsOk, or why not.
enum DdprunEtcdTlsStatus : int {
  kDdprunEtcdTlsOk = 0,
  kDdprunEtcdTlsMemberFailure = 1,  // this member, this time: try another
  kDdprunEtcdTlsConfigError = 2,    // a TLS file that cannot be loaded
};

// One line naming what failed and why, NUL-terminated (cut to fit).
struct DdprunEtcdTlsError {
  int status;
  char text[1024];
};

// Takes a piece of an answer. 0: go on; anything else ends the read, which
// then fails (the caller keeps its own reason).
using DdprunEtcdTlsSink = int (*)(void* user, const char* bytes, std::size_t size);

struct DdprunEtcdTlsApi {
  std::uint32_t abi_version;  // kDdprunEtcdTlsAbiVersion

  // A client's TLS context: the CA file (empty: the system's CAs), and the
  // client certificate and key (empty: none). nullptr on failure.
  void* (*load_context)(const char* ca_file, const char* cert_file, const char* key_file,
                        DdprunEtcdTlsError* error);
  void (*free_context)(void* context);

  // An unopened connection to host:port (no I/O); nullptr on failure.
  void* (*new_connection)(void* context, const char* host, std::uint16_t port,
                          std::int64_t request_timeout_ms, DdprunEtcdTlsError* error);
  void (*free_connection)(void* connection);

  // As Connection's methods of the same names (etcd_http.hpp). Each returns
  // a DdprunEtcdTlsStatus, except read_stream: 1 more to come, 0 the body
  // ended, -1 failed.
  int (*open)(void* connection, std::int64_t deadline_ns, DdprunEtcdTlsError* error);
  int (*post)(void* connection, const char* target, const char* body, std::size_t body_size,
              std::int64_t deadline_ns, unsigned* status, DdprunEtcdTlsSink answer, void* user,
              DdprunEtcdTlsError* error);
  int (*reusable)(const void* connection);
  int (*closed_while_idle)(const void* connection);
  int (*start_stream)(void* connection, const char* target, const char* body, std::size_t body_size,
                      std::int64_t deadline_ns, unsigned* status, DdprunEtcdTlsSink error_body,
                      void* user, DdprunEtcdTlsError* error);
  int (*read_stream)(void* connection, int has_deadline, std::int64_t deadline_ns,
                     DdprunEtcdTlsSink on_bytes, void* user, DdprunEtcdTlsError* error);
  void (*abort)(void* connection);
};

// The module's one exported function.
const DdprunEtcdTlsApi* ddprun_etcd_tls_api_v1();

}  // extern "C"

inline constexpr std::uint32_t kDdprunEtcdTlsAbiVersion = 1;
inline constexpr char kDdprunEtcdTlsEntry[] = "ddprun_etcd_tls_api_v1";
