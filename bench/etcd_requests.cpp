#include "etcd_requests.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

#include "ddprun/launcher/etcd/etcd_client.hpp"
#include "elapsed.hpp"

namespace ddprun::bench {

EtcdRequestTimes timeEtcdRequests(const std::string& endpoints, int samples) {
  namespace etcd = launcher::etcd;
  using Clock = std::chrono::steady_clock;
  etcd::ClientOptions options;
  options.members = etcd::parseMembers("the etcd cluster", endpoints);
  etcd::Client client(options);
  const std::string prefix = "/rdzv_bench/etcd_requests/";
  client.getPrefix(prefix);  // the connection is open before the first figure
  EtcdRequestTimes times;
  for (int i = 0; i < samples; ++i) {
    const std::string member = prefix + "member/" + std::to_string(i);
    const auto grant_start = Clock::now();
    const std::int64_t lease = client.grantLease(std::chrono::seconds(2));
    times.grant.add(msSince(grant_start));
    const auto put_start = Clock::now();
    const std::int64_t revision = client.put(member, "{}", lease);
    times.put.add(msSince(put_start));
    const auto txn_start = Clock::now();
    const etcd::TxnResult txn =
        client.txn({{member, etcd::Compare::Target::kModRevision, revision}},
                   {{etcd::Operation::Kind::kPut, prefix + "state", "{}", 0}});
    times.txn.add(msSince(txn_start));
    if (!txn.succeeded) {
      throw std::runtime_error("etcd's transaction on " + member + " at revision " +
                               std::to_string(revision) + " failed: the key changed meanwhile?");
    }
    times.three_writes.add(msSince(grant_start));
    const auto read_start = Clock::now();
    client.getPrefix(prefix, etcd::Client::Read::kSerializable);
    times.serializable_read.add(msSince(read_start));
    client.revokeLease(lease);
  }
  client.txn({}, {{etcd::Operation::Kind::kDeletePrefix, prefix, "", 0}});
  return times;
}

}  // namespace ddprun::bench
