// heed::dist: an evaluation shared by the processes of a run.
//
// Every rank draws the same evaluation batches (from the same generator), computes the loss of
// its share of them, and one all-gather gives every rank all the losses, which each adds up in
// batch order: the same number on every rank, and the very number one process adding the same
// losses in order gets (float64 addition is not associative, so the order is part of the result).
#pragma once

#include <cstdint>
#include <vector>

#include "dist/communicator.h"
#include "dist/sum_tree.h"

namespace heed::dist {

/// Rank `rank`'s share of `count` items (0 <= rank < size): consecutive indices, the first
/// count % size ranks one more than the others.
Span share_of(int64_t count, int rank, int size);

/// The mean of `count` values of which this rank computed its share_of(count, rank, size), in
/// index order: their sum in index order, divided by count, on every rank.
double mean_in_order(Communicator& comm, const std::vector<double>& mine, int64_t count);

}  // namespace heed::dist
