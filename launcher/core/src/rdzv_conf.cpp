#include "ddprun/launcher/core/rdzv_conf.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>

#include "ddprun/launcher/core/option_values.hpp"

namespace ddprun::launcher {
namespace {

using Duration = RdzvConf::Duration;

// The longest ddprun waits (1e9 s, as seconds() allows), in milliseconds.
constexpr std::int64_t kMaxWaitMs = 1'000'000'000'000;

Duration seconds(std::string_view what, std::string_view text) {
  const double value = parsePositiveDouble(what, text);
  if (value > 1e9) {
    failValue(what, text, "more seconds than ddprun can wait (at most 1e9)");
  }
  // At least 1 ms: a positive timeout never rounds down to "no time at all".
  return Duration(std::max<std::int64_t>(1, std::llround(value * 1000.0)));
}

// torchrun's bool words (rendezvous/utils.py), nothing else.
bool boolean(std::string_view what, std::string_view text) {
  for (const char* yes : {"1", "true", "t", "yes", "y"}) {
    if (text == yes) {
      return true;
    }
  }
  for (const char* no : {"0", "false", "f", "no", "n"}) {
    if (text == no) {
      return false;
    }
  }
  failValue(what, text, "expected 1, true, t, yes, y or 0, false, f, no, n");
}

using Setter = std::function<void(RdzvConf&, std::string_view what, std::string_view text)>;

Setter duration(std::optional<Duration> RdzvConf::*field) {
  return [field](RdzvConf& conf, std::string_view what, std::string_view text) {
    conf.*field = seconds(what, text);
  };
}

Setter etcdSetting(std::string key) {
  return [key = std::move(key)](RdzvConf& conf, std::string_view, std::string_view text) {
    conf.etcd[key] = std::string(text);
  };
}

// Every key any of torchrun's backends reads (docs/torchrun-contract.md §6.4).
const std::map<std::string, Setter, std::less<>>& knownKeys() {
  static const std::map<std::string, Setter, std::less<>> keys = {
      {"timeout", duration(&RdzvConf::timeout)},
      {"join_timeout", duration(&RdzvConf::join_timeout)},
      {"last_call_timeout", duration(&RdzvConf::last_call_timeout)},
      {"close_timeout", duration(&RdzvConf::close_timeout)},
      {"read_timeout", duration(&RdzvConf::read_timeout)},
      {"heartbeat_timeout", duration(&RdzvConf::heartbeat_timeout)},
      {"keep_alive_interval", duration(&RdzvConf::keep_alive_interval)},
      {"keep_alive_max_attempt",
       [](RdzvConf& conf, std::string_view what, std::string_view text) {
         conf.keep_alive_max_attempt = parseInt(what, text, 1, std::numeric_limits<int>::max());
       }},
      {"is_host", [](RdzvConf& conf, std::string_view what,
                     std::string_view text) { conf.is_host = boolean(what, text); }},
      {"store_type",
       [](RdzvConf&, std::string_view what, std::string_view text) {
         if (text != "tcp") {
           failValue(what, text, "ddprun's stores are TCP stores (store_type=tcp)");
         }
       }},
      {"rank",  // torchrun replaces it with --node-rank; checked, then unused
       [](RdzvConf&, std::string_view what, std::string_view text) {
         parseInt(what, text, 0, std::numeric_limits<int>::max());
       }},
      {"token_file", [](RdzvConf& conf, std::string_view,
                        std::string_view text) { conf.token_file = std::string(text); }},
      {"quarantine_after",
       [](RdzvConf& conf, std::string_view what, std::string_view text) {
         conf.quarantine_after = parseInt(what, text, 0, std::numeric_limits<int>::max());
       }},
      {"quarantine_seconds", duration(&RdzvConf::quarantine_seconds)},
      {"use_libuv",  // how PyTorch's own store server is built; ddprund is one server
       [](RdzvConf&, std::string_view what, std::string_view text) { boolean(what, text); }},
      {"protocol",
       [](RdzvConf& conf, std::string_view what, std::string_view text) {
         if (text != "http" && text != "https") {
           failValue(what, text, "etcd speaks http or https");
         }
         conf.etcd["protocol"] = std::string(text);
       }},
      {"cacert", etcdSetting("cacert")},
      {"cert", etcdSetting("cert")},
      {"key", etcdSetting("key")},
      {"ca_cert", etcdSetting("ca_cert")},
      {"ssl_cert", etcdSetting("ssl_cert")},
      {"ssl_cert_key", etcdSetting("ssl_cert_key")},
      {"etcd_prefix", etcdSetting("etcd_prefix")},
  };
  return keys;
}

// etcd's TLS settings only mean something together: a CA or certificate
// over plain http, or a certificate without its key, is a mistake.
void checkEtcdTls(std::string_view what, const RdzvConf& conf) {
  const auto given = [&conf](std::initializer_list<const char*> names) -> std::string {
    for (const char* name : names) {
      if (conf.etcd.contains(name)) {
        return name;
      }
    }
    return "";
  };
  const std::string cert = given({"cert", "ssl_cert"});
  const std::string key = given({"key", "ssl_cert_key"});
  const std::string tls_setting = !cert.empty() ? cert : given({"cacert", "ca_cert"});
  const auto protocol = conf.etcd.find("protocol");
  if (!tls_setting.empty() && (protocol == conf.etcd.end() || protocol->second != "https")) {
    failValue(std::string(what) + " " + tls_setting, conf.etcd.at(tls_setting),
              "a TLS setting needs protocol=https (http is the default)");
  }
  if (cert.empty() != key.empty()) {
    const std::string one = cert.empty() ? key : cert;
    failValue(std::string(what) + " " + one, conf.etcd.at(one),
              "cert and key go together: a client certificate needs its key");
  }
}

std::string knownKeyList() {
  std::string list;
  for (const auto& [key, setter] : knownKeys()) {
    list += (list.empty() ? "" : ", ") + key;
  }
  return list;
}

}  // namespace

RdzvConf typeRdzvConf(std::string_view what, const std::map<std::string, std::string>& pairs) {
  RdzvConf conf;
  for (const auto& [key, value] : pairs) {
    const std::string key_what = std::string(what) + " " + key;
    const auto known = knownKeys().find(key);
    if (known == knownKeys().end()) {
      failValue(key_what, value, "unknown key (ddprun knows " + knownKeyList() + ")");
    }
    known->second(conf, key_what, value);
  }
  checkEtcdTls(what, conf);
  // The daemon's keep-alive timeout is their product: each within bounds, it
  // may not be (and a timeout the daemon cannot keep would drop the agent).
  const std::int64_t interval_ms = conf.keepAliveInterval().count();
  if (interval_ms > kMaxWaitMs / conf.keepAliveMaxAttempt()) {
    const auto text = [&pairs](const std::string& key, const char* fallback) {
      const auto given = pairs.find(key);
      return given != pairs.end() ? given->second : std::string(fallback);
    };
    failValue(std::string(what) + " keep_alive_interval x keep_alive_max_attempt",
              text("keep_alive_interval", "5") + " x " + text("keep_alive_max_attempt", "3"),
              "more seconds than ddprun can wait (at most 1e9)");
  }
  return conf;
}

}  // namespace ddprun::launcher
