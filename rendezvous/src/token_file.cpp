#include "ddprun/rendezvous/token_file.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ddprun/proto/errors.hpp"

namespace ddprun::rdzv {

Token readTokenFile(const std::string& what, const std::string& path) {
  const std::string named = what + " '" + path + "'";
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw ConfigError(named + ": cannot read the token file: " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    throw ConfigError(named + ": the token file is not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    throw ConfigError(named + ": cannot read the token file");
  }
  std::string secret = text.str();
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (secret.empty()) {
    throw ConfigError(named + ": the token file is empty");
  }
  Token token{std::move(secret), std::nullopt};
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    token.warning = "the token file " + path + " can be read by other users; chmod 600 it";
  }
  return token;
}

}  // namespace ddprun::rdzv
