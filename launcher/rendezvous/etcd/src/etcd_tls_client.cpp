// etcd over TLS from ddprun's side: loads the TLS module (etcd_tls_abi.hpp)
// for each client that asks for protocol=https (dlopen loads it once and
// counts the others), and forwards a Connection's calls to it.
//
// The module is found beside ddprun as it is installed: the directory
// DDPRUN_ETCD_TLS_MODULE_FROM_BINDIR (relative to the executable's own, the
// same in the build tree) or, for a client in another program (tests), the
// path ClientOptions::tls_module names. Loaded once and never unloaded.
#include <dlfcn.h>

#include <exception>
#include <filesystem>
#include <string>

#include "ddprun/proto/errors.hpp"
#include "etcd_http.hpp"
#include "etcd_tls_abi.hpp"

namespace ddprun::launcher::etcd::detail {

struct TlsContext {
  TlsContext(const DdprunEtcdTlsApi& module_api, void* module_context,
             std::chrono::milliseconds timeout)
      : api(module_api), context(module_context), request_timeout(timeout) {}
  ~TlsContext() { api.free_context(context); }
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  const DdprunEtcdTlsApi& api;
  void* context;
  std::chrono::milliseconds request_timeout;
};

namespace {

std::string defaultModulePath() {
  std::error_code ec;
  const auto executable = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    throw ConfigError(
        "etcd over TLS: cannot find ddprun's own executable to find its TLS module: " +
        ec.message());
  }
  return (executable.parent_path() / DDPRUN_ETCD_TLS_MODULE_FROM_BINDIR /
          DDPRUN_ETCD_TLS_MODULE_NAME)
      .lexically_normal()
      .string();
}

const DdprunEtcdTlsApi& loadModule(const std::string& path) {
  const auto cannot = [&path](const std::string& why) {
    return ConfigError("etcd over TLS needs ddprun's TLS module " + path + ": " + why);
  };
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (module == nullptr) {
    const char* error = ::dlerror();
    std::string why = error != nullptr ? error : "dlopen failed";
    if (why.rfind(path + ": ", 0) == 0) {  // dlerror names the file too
      why.erase(0, path.size() + 2);
    }
    throw cannot(why);
  }
  using Entry = const DdprunEtcdTlsApi* (*)();
  const auto entry = reinterpret_cast<Entry>(::dlsym(module, kDdprunEtcdTlsEntry));
  if (entry == nullptr) {
    throw cannot(std::string("it has no ") + kDdprunEtcdTlsEntry);
  }
  const DdprunEtcdTlsApi* api = entry();
  if (api == nullptr || api->abi_version != kDdprunEtcdTlsAbiVersion) {
    throw cannot("it is of another version of ddprun");
  }
  return *api;
}

// A read's sink: hands the module's bytes to the caller's function, keeping
// what it throws for the caller's thread (it must not unwind the module).
struct SinkCall {
  const std::function<void(std::string_view)>& take;
  std::exception_ptr failed;

  static int take_bytes(void* user, const char* bytes, std::size_t size) noexcept {
    auto* call = static_cast<SinkCall*>(user);
    try {
      call->take(std::string_view(bytes, size));
      return 0;
    } catch (...) {
      call->failed = std::current_exception();
      return 1;
    }
  }
};

std::int64_t nanoseconds(Clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
}

// Connection's calls, made by the module.
class ModuleConnection final : public Connection {
 public:
  ModuleConnection(const Member& member, std::shared_ptr<TlsContext> tls)
      : tls_(std::move(tls)), api_(tls_->api) {
    DdprunEtcdTlsError error{};
    connection_ = api_.new_connection(tls_->context, member.host.c_str(), member.port,
                                      tls_->request_timeout.count(), &error);
    if (connection_ == nullptr) {
      check(error.status, error, nullptr);
    }
  }
  ~ModuleConnection() override { api_.free_connection(connection_); }

  void open(Clock::time_point deadline) override {
    DdprunEtcdTlsError error{};
    check(api_.open(connection_, nanoseconds(deadline), &error), error, nullptr);
  }

  HttpAnswer post(const std::string& target, const std::string& body,
                  Clock::time_point deadline) override {
    HttpAnswer answer;
    const std::function<void(std::string_view)> append = [&answer](std::string_view bytes) {
      answer.body.append(bytes);
    };
    SinkCall call{append, nullptr};
    DdprunEtcdTlsError error{};
    check(api_.post(connection_, target.c_str(), body.data(), body.size(), nanoseconds(deadline),
                    &answer.status, &SinkCall::take_bytes, &call, &error),
          error, &call);
    return answer;
  }

  bool reusable() const override { return api_.reusable(connection_) != 0; }
  bool closedWhileIdle() const override { return api_.closed_while_idle(connection_) != 0; }

  unsigned startStream(const std::string& target, const std::string& body,
                       Clock::time_point deadline, std::string& error_body) override {
    unsigned status = 0;
    const std::function<void(std::string_view)> append = [&error_body](std::string_view bytes) {
      error_body.append(bytes);
    };
    SinkCall call{append, nullptr};
    DdprunEtcdTlsError error{};
    check(api_.start_stream(connection_, target.c_str(), body.data(), body.size(),
                            nanoseconds(deadline), &status, &SinkCall::take_bytes, &call, &error),
          error, &call);
    return status;
  }

  bool readStream(std::optional<Clock::time_point> deadline,
                  const std::function<void(std::string_view)>& on_bytes) override {
    SinkCall call{on_bytes, nullptr};
    DdprunEtcdTlsError error{};
    const int more =
        api_.read_stream(connection_, deadline ? 1 : 0, deadline ? nanoseconds(*deadline) : 0,
                         &SinkCall::take_bytes, &call, &error);
    if (more < 0) {
      check(error.status, error, &call);
    }
    return more > 0;
  }

  void abort() override { api_.abort(connection_); }

 private:
  // Throws what the sink caught first (its caller's own failure), else the
  // module's line as the error it names.
  static void check(int status, const DdprunEtcdTlsError& error, const SinkCall* call) {
    if (call != nullptr && call->failed) {
      std::rethrow_exception(call->failed);
    }
    if (status == kDdprunEtcdTlsConfigError) {
      throw ConfigError(error.text);
    }
    if (status != kDdprunEtcdTlsOk) {
      throw MemberFailure(error.text);
    }
  }

  std::shared_ptr<TlsContext> tls_;  // outlives the module's connection
  const DdprunEtcdTlsApi& api_;
  void* connection_ = nullptr;
};

}  // namespace

std::shared_ptr<TlsContext> loadTlsContext(const ClientOptions& options) {
  if (!options.tls) {
    return nullptr;
  }
  const DdprunEtcdTlsApi& api =
      loadModule(options.tls_module.empty() ? defaultModulePath() : options.tls_module);
  DdprunEtcdTlsError error{};
  void* context = api.load_context(options.ca_file.c_str(), options.cert_file.c_str(),
                                   options.key_file.c_str(), &error);
  if (context == nullptr) {
    throw ConfigError(error.text);
  }
  return std::make_shared<TlsContext>(api, context, options.request_timeout);
}

std::unique_ptr<Connection> newTlsConnection(const Member& member,
                                             const std::shared_ptr<TlsContext>& tls) {
  return std::make_unique<ModuleConnection>(member, tls);
}

}  // namespace ddprun::launcher::etcd::detail
