// `heed train` and `heed bench` on N processes (mpirun -np N) and with gradient accumulation
// (--grad-accum A), over the dist/ library (docs/scaling.md).
//
// A step draws the whole global batch of A micro-batches of --batch-size sequences on every
// process, from the one batch generator; rank r computes micro-batches [r A/N, (r+1) A/N), and
// dist::GradReducer sums their gradients in a tree that depends on A only, so the step's gradient,
// and with it the model, has the same bits for every N dividing A (one process included). A plain
// run (A = 1, one process) never comes here: its step is exactly the one heed always ran.
//
// Rank 0 alone writes the run directory and prints; the other ranks' standard output is thrown
// away. Every evaluation is shared (each rank computes its share of the batches) and starts with a
// comparison of the parameters' checksums across ranks. A stop signal (Ctrl-C to mpirun reaches
// the ranks as SIGCONT) abandons the step in flight on every rank: rank 0 saves the state the
// step started from, and every rank exits at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "dist/communicator.h"
#include "dist/grad_reducer.h"
#include "dist/micro_batch_generators.h"
#include "nn/module.h"

namespace heed::cli {

/// Runs `command` (a subcommand's body, given the processes of the run) in this process's share of
/// the job. Under mpirun it joins the job first (dist::Runtime), sends the standard output of ranks
/// other than 0 to /dev/null, and makes every failure end the whole job (MPI_Abort): rank 0 at
/// once, printing "heed: error: MSG" for a refusal of the options and "heed: error: rank 0 of N:
/// MSG" otherwise; another rank only if mpirun has not begun to end the job ten seconds later, so
/// that an error every rank meets is printed once, by rank 0 (the others leave without a word).
/// A stop (exit code above 128) ends the process at once, without MPI_Finalize (mpirun kills the
/// ranks two seconds after Ctrl-C, and finalizing then takes longer). Without mpirun it calls
/// `command` with a one-process world whose waits and steps poll the stop signal (a dist::Stopped
/// the command lets through becomes the Stopped of that signal), and loads no MPI library.
int on_processes(const std::function<int(dist::Communicator&)>& command);

/// The processes mpirun started on this host (1 without mpirun): `--threads 0` gives each its share
/// of the cores.
int processes_on_this_host();

/// Whether `world` and --grad-accum `micro_batches` need the data-parallel step (else the plain one).
/// Throws UsageError when the process count does not divide `micro_batches`.
bool needs_data_parallel(const dist::Communicator& world, int64_t micro_batches);

/// One step's gradients over A micro-batches shared by the processes of `world`.
class DataParallelStep {
 public:
  DataParallelStep(nn::Module& model, dist::Communicator& world, int64_t micro_batches, bool overlap);

  /// The micro-batches of the global batch `x`, `y` (A x batch rows of `block` ids) this rank owns
  /// go through `loss` (micro-batch rows -> the loss tensor) and backward; on return every
  /// parameter's .grad is the step's mean gradient, the same on every rank, and the result is the
  /// mean loss of the A micro-batches (the same on every rank). `data_gen` is the batch generator:
  /// on a stop (dist::Stopped, rethrown) it and the dropout generators go back to the step's start.
  double gradients(const std::vector<int32_t>& x, const std::vector<int32_t>& y, int64_t batch, int64_t block,
                   Generator& data_gen, const Generator::State& data_at_start,
                   const std::function<Tensor(const std::vector<int32_t>&, const std::vector<int32_t>&)>& loss);

  const dist::ReducerTimes& last_times() const { return reducer_.last_times(); }

 private:
  dist::Communicator& world_;
  int64_t micro_batches_;
  std::vector<Generator*> dropout_;
  dist::GradReducer reducer_;
  dist::MicroBatchGenerators streams_;
  std::vector<int32_t> xi_, yi_;
};

/// The shared evaluation's mean of `count` batch losses: this rank computes `loss_of(k)` for its
/// share of k in [0, count) (`draw(k)` runs for every k, so every rank's generator moves alike);
/// throws dist::Stopped if a stop arrives while waiting for the others.
double shared_mean_loss(dist::Communicator& world, int64_t count, const std::function<void(int64_t)>& draw,
                        const std::function<double(int64_t)>& loss_of);

}  // namespace heed::cli
