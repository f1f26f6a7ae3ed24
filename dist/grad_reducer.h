// heed::dist: gradient accumulation over the micro-batches of an optimizer step, shared by the
// processes of a run, with a result that does not depend on how many processes share it.
//
//   dist::GradReducer reducer(model.parameters(), world, {.micro_batches = A});
//   every step:
//     draw all A micro-batches (every rank draws them all, from the same generator: cheap)
//     std::vector<double> losses;
//     for (int64_t i = reducer.local_micro_batches().lo; i < reducer.local_micro_batches().hi; ++i) {
//       // (with dropout: dist::MicroBatchGenerators::begin_micro_batch(i) first)
//       Tensor loss = model.loss(x[i], y[i], B, T);
//       losses.push_back(loss.item());
//       reducer.backward(loss);
//     }
//     reducer.finish_step();                    // every .grad: the mean over the A micro-batches
//     double loss = reducer.mean_loss(losses);  // the same number on every rank
//     clip_grad_norm(...); optimizer.step(); model.zero_grad();
//
// Rank r of N (N divides A) computes micro-batches [r A/N, (r+1) A/N). The gradient of the step
// is (the sum of the A micro-batch gradients) / A, the sum formed in the tree of dist/sum_tree.h:
// - each rank adds its micro-batches' gradients in that tree as they come, which leaves the
//   partial sums of its part of the tree (one when A/N is a power of two);
// - the parameters' gradients, laid end to end (in reverse order of registration: the order in
//   which backward finishes them), are cut into buckets of about bucket_bytes, and each bucket
//   into N shards. Rank s receives every rank's partial sums of shard s, adds them in the tree's
//   order, divides by A and sends the result to every rank: a reduce-scatter whose additions
//   follow the tree, then an all-gather.
// So every rank, and one process with the same A, performs the same additions: the gradient has
// the same bits for every N dividing A, provided each micro-batch's own gradient has the same bits
// on every rank (same code, same product kernels, the same number of cores per process: a
// product's pieces follow from it, core/tuning.h). Each rank sends (c + 1)(N - 1)/N of the gradient's
// bytes per step, c its number of partial sums; with c = 1 that is the 2 (N - 1)/N of a ring
// all-reduce.
// With overlap on, a bucket leaves as soon as the last micro-batch's backward has finished every
// parameter in it (core/autograd.h's grad-ready hook), while lower layers are still being
// differentiated; transfers move on each time the hook runs, and finish_step() waits for the rest.
//
// Stopping: backward(), the hook and every wait ask the communicator's stop check
// (Communicator::set_stop_check) and throw dist::Stopped when it says so. The step's gradients are
// then lost, but the parameters and the optimizer still hold the state the step started from:
// what a trainer saves before it exits (a stop signal under mpirun leaves about two seconds
// before SIGKILL, too little to finish a step whose peer may be dead; docs/scaling.md). The
// reducer cannot be used after that.
//
// A = N = 1 is a plain step: backward() is loss.backward() and finish_step() does nothing.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "dist/communicator.h"
#include "dist/sum_tree.h"

namespace heed::dist {

struct GradReducerOptions {
  int64_t micro_batches = 1;  ///< A, per optimizer step: a multiple of the process count
  bool overlap = true;        ///< send buckets during the last micro-batch's backward
  int64_t bucket_bytes = int64_t(4) << 20;
};

/// Where one step's communication time went (seconds, this rank), for benchmarks and logs.
struct ReducerTimes {
  double in_backward = 0;     ///< reducer work inside the grad-ready hook (overlapped)
  double after_backward = 0;  ///< taking the remaining gradients and starting buckets, after backward
  double finish = 0;          ///< finish_step(): waiting for the rest and the last sums
  int64_t bytes_sent = 0;
};

class GradReducer {
 public:
  /// `params`: float32 leaves, each listed once (model.parameters()). Throws heed::Error if
  /// micro_batches < 1, is not a multiple of comm.size(), or bucket_bytes < 4.
  GradReducer(std::vector<Tensor> params, Communicator& comm, GradReducerOptions options = {});
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  /// This rank's micro-batches of every step: [lo, hi) within [0, A), A / N consecutive ones.
  Span local_micro_batches() const { return mine_; }
  /// Runs loss.backward() for this rank's next micro-batch and takes the gradients out of the
  /// parameters (their .grad is dropped). Call once per local micro-batch, in order; the
  /// parameters must have no gradient before the step's first call.
  void backward(const Tensor& loss);
  /// After this rank's last backward of the step: every parameter's .grad becomes the mean
  /// gradient of the step's A micro-batches (views into one buffer of the step), the same bits
  /// on every rank. Blocks until every rank has contributed.
  void finish_step();
  /// The mean of the step's A micro-batch losses from this rank's (in micro-batch order), added
  /// in the same tree: the same number on every rank and for every N. Blocks like finish_step.
  double mean_loss(const std::vector<double>& local_losses);

  /// Timings of the last finished step.
  const ReducerTimes& last_times() const { return last_times_; }
  /// The number of buckets the gradient is sent in.
  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    int64_t lo = 0, hi = 0;  // range of the flat gradient
    int pending = 0;         // parameters of the last micro-batch not yet taken
    int phase = 0;           // 0 waiting, 1 partial sums travelling, 2 results travelling, 3 done
    std::vector<Request> requests = {};
    int64_t packed = 0;      // where this rank's shard of it sits in the receive buffers
  };
  bool plain() const;
  Span shard(const Bucket& b, int rank) const;
  void take(size_t p);
  void start_ready_buckets();
  void start(size_t b);
  bool progress();
  void reduce_and_share(size_t b);
  void on_grad_ready(const Tensor& leaf);

  std::vector<Tensor> params_;
  Communicator& comm_;
  GradReducerOptions options_;
  int rank_, size_;
  SumTree tree_;
  Span mine_;
  MergePlan local_plan_;   // this rank's micro-batches, one leaf each
  MergePlan global_plan_;  // every rank's partial sums, rank 0's first
  std::vector<int> partial_sums_of_;  // per rank

  std::vector<int64_t> offset_;  // per parameter, in the flat gradient
  int64_t total_ = 0;
  std::unordered_map<const TensorImpl*, size_t> index_of_;
  std::vector<Bucket> buckets_;
  std::vector<std::vector<size_t>> buckets_of_;  // per parameter

  std::vector<Tensor> stack_;   // flat partial sums (local_plan_.depth of them)
  std::vector<Tensor> inbox_;   // per global plan input from another rank: my shards, packed
  Tensor result_;               // the step's mean gradient
  int depth_ = 0;               // live stack entries
  int64_t pass_ = 0;            // local micro-batches done this step
  std::vector<char> taken_;     // per parameter, in this pass
  size_t next_start_ = 0;       // buckets start in order, so every rank posts them alike
  ReducerTimes times_, last_times_;
};

}  // namespace heed::dist
