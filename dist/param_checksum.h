// heed::dist: checking that every process holds the same parameters.
//
// Data-parallel ranks apply the same update to the same weights, so their parameters stay
// identical bit for bit, as long as nothing differs between them (a different number of cores per
// process, or library, on one host; a bug). The trainer compares checksums at every evaluation and stops the
// run on a mismatch rather than train N drifting models.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "dist/communicator.h"

namespace heed::dist {

/// A 64-bit checksum of a tensor's values as stored (row-major bytes): any changed bit changes it
/// with probability 1 - 2^-64.
uint64_t checksum(const Tensor& t);

/// Compares the checksum of every tensor of `named` across the ranks (one all-gather of 8 bytes
/// per tensor; every rank must pass the same names in the same order). On a mismatch, every rank
/// throws the same heed::Error naming the first tensor that differs, the ranks whose copy is not
/// rank 0's, and how many tensors differ.
void require_same_parameters(Communicator& comm, const std::vector<std::pair<std::string, Tensor>>& named);

}  // namespace heed::dist
