#include "server_options.hpp"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string_view>

namespace ddprun::bench {

ServerOptions parseServerOptions(int argc, char** argv) {
  ServerOptions options;
  for (int i = 1; i < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (i + 1 == argc) {
      throw std::invalid_argument("missing value for " + std::string(flag));
    }
    if (flag == "--host") {
      options.host = argv[i + 1];
    } else if (flag == "--port") {
      options.port = static_cast<std::uint16_t>(std::stoul(argv[i + 1]));
    } else if (flag == "--port-file") {
      options.port_file = argv[i + 1];
    } else {
      throw std::invalid_argument("unknown option " + std::string(flag));
    }
  }
  return options;
}

void writePortFile(const std::string& path, std::uint16_t port) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp);
    out << port << '\n';
  }
  std::filesystem::rename(temp, path);
}

}  // namespace ddprun::bench
