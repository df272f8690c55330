// Random bytes from the kernel's generator, for run ids and the token's
// nonces: one getrandom(2) call. Not std::random_device, which draws four
// bytes per call with RDSEED, an instruction that fails and is retried when
// drawn from quickly (run ids made in a loop took 0.2 ms each here), nor
// OpenSSL's RAND_bytes, whose generator is seeded on first use.
#pragma once

#include <span>

namespace ddprun::proto {

// Fills `bytes`; throws ddprun::Error naming the cause when the kernel
// cannot (which it only refuses before its generator is first seeded).
void fillRandom(std::span<unsigned char> bytes);

}  // namespace ddprun::proto
