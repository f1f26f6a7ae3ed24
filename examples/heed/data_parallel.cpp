#include "data_parallel.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

#include "commands.h"
#include "dist/runtime.h"
#include "dist/shared_eval.h"
#include "stop.h"
#include "train_state.h"

namespace heed::cli {

namespace {

// One line on standard error, as main's errors are.
void print_error(std::string msg) {
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "heed: error: %s\n", msg.c_str());
  std::fflush(stderr);
}

// How long a rank other than 0 that failed waits for the job to end before it reports its own
// error. When rank 0 meets the same error, its MPI_Abort reaches this rank as mpirun's SIGCONT
// (then SIGTERM) within milliseconds, so the wait is cut short; the full wait only passes for an
// error of this rank alone (which then ends the job this much later), or if rank 0 runs this far
// behind on a loaded machine (sanitizers, more ranks than cores).
constexpr std::chrono::seconds kWaitForRankZero{10};

// Whether mpirun signals this rank (a stop signal under mpirun: it is ending the job because
// another rank called MPI_Abort or died, or on Ctrl-C) within `limit`, or did already.
bool job_ends_within(std::chrono::steady_clock::duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (g_stop_signal == 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

int on_processes(const std::function<int(dist::Communicator&)>& command) {
  const auto stop_requested = [] { return g_stop_signal != 0; };
  // A stop inside a data-parallel step that the command does not catch (heed bench) is the stop
  // it is: exit 128 + N with main's one line, on one process and under mpirun alike.
  const auto run = [&](dist::Communicator& world) {
    try {
      return command(world);
    } catch (const dist::Stopped&) {
      if (g_stop_signal) throw Stopped(g_stop_signal);
      throw;
    }
  };
  if (!dist::launched_by_mpirun()) {
    dist::LocalCommunicator world;
    world.set_stop_check(stop_requested);  // a step of many micro-batches polls it between them
    return run(world);
  }
  dist::Runtime runtime;
  dist::Communicator& world = runtime.world();
  const int rank = world.rank(), size = world.size();
  if (rank != 0) {  // one voice: rank 0's
    std::fflush(stdout);
    if (const int fd = ::open("/dev/null", O_WRONLY); fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::close(fd);
    }
  }
  world.set_stop_check(stop_requested);
  // A failure ends the job at once from rank 0. Another rank first waits for rank 0: when rank 0
  // meets the same error (a refusal of the options, a checksum mismatch: every rank throws alike),
  // mpirun ends the job after rank 0's MPI_Abort, and this rank leaves without a word; an error of
  // its own is printed when the wait is over. It must not wait for mpirun's SIGKILL instead: that
  // comes odls_base_sigkill_timeout seconds after the SIGTERM (1 by default, more when a user gives
  // large models' saves more time), and a rank still alive by then repeated rank 0's line.
  auto fail = [&](int exit_code, const std::string& msg, bool name_rank) {
    if (rank != 0 && job_ends_within(kWaitForRankZero)) std::_Exit(exit_code);  // rank 0 has said it
    print_error(name_rank || rank != 0 ? "rank " + std::to_string(rank) + " of " + std::to_string(size) + ": " + msg
                                       : msg);
    world.abort(exit_code);
  };
  int code = 0;
  try {
    code = run(world);
  } catch (const Stopped& e) {
    if (rank == 0) std::fprintf(stderr, "heed: stopped by signal %d\n", e.signal);  // as main says it
    code = 128 + e.signal;
  } catch (const UsageError& e) {
    fail(2, e.what(), false);
  } catch (const std::bad_alloc&) {
    fail(1, "out of memory", true);
  } catch (const std::exception& e) {
    fail(1, e.what(), true);
  }
  if (code != 0) {
    // Stopped: rank 0 has saved. No MPI_Finalize: mpirun is already ending the job, and
    // finalizing then takes seconds its SIGKILL may not leave (docs/scaling.md). The other ranks
    // do not leave first: a transfer rank 0 still drives could read from a process that is gone
    // (Open MPI's shared-memory transport then ends rank 0 before it saves). They wait for
    // mpirun's SIGKILL (two seconds after Ctrl-C by default), or half a minute.
    std::fflush(stdout);
    std::fflush(stderr);
    if (rank != 0) std::this_thread::sleep_for(std::chrono::seconds(30));
    std::_Exit(code);
  }
  return 0;  // every rank leaves the job (MPI_Finalize) as `runtime` goes
}

int processes_on_this_host() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const long n = local ? std::strtol(local, nullptr, 10) : 1;
  return n >= 1 && n <= 1 << 20 ? static_cast<int>(n) : 1;
}

bool needs_data_parallel(const dist::Communicator& world, int64_t micro_batches) {
  const int n = world.size();
  if (micro_batches % n != 0)
    throw UsageError("--grad-accum " + std::to_string(micro_batches) + ": the " + std::to_string(n) +
                     " processes of this job must divide it (each takes an equal share of a step's micro-batches); "
                     "give --grad-accum " + std::to_string(n) + " or a multiple of it");
  return micro_batches > 1 || n > 1;
}

DataParallelStep::DataParallelStep(nn::Module& model, dist::Communicator& world, int64_t micro_batches, bool overlap)
    : world_(world),
      micro_batches_(micro_batches),
      dropout_([&] {
        std::vector<Generator*> gens;
        for (auto& [path, g] : dropout_generators(model)) gens.push_back(g);
        return gens;
      }()),
      reducer_(model.parameters(), world, {.micro_batches = micro_batches, .overlap = overlap}),
      streams_(dropout_, micro_batches, world.size()) {}

double DataParallelStep::gradients(
    const std::vector<int32_t>& x, const std::vector<int32_t>& y, int64_t batch, int64_t block, Generator& data_gen,
    const Generator::State& data_at_start,
    const std::function<Tensor(const std::vector<int32_t>&, const std::vector<int32_t>&)>& loss) {
  std::vector<Generator::State> dropout_at_start;
  for (Generator* g : dropout_) dropout_at_start.push_back(g->state());
  const int64_t rows = batch * block;
  try {
    std::vector<double> losses;
    const dist::Span mine = reducer_.local_micro_batches();
    for (int64_t i = mine.lo; i < mine.hi; ++i) {
      world_.check_stop();  // each micro-batch: a step of --grad-accum 4096 runs for minutes
      xi_.assign(x.begin() + i * rows, x.begin() + (i + 1) * rows);
      yi_.assign(y.begin() + i * rows, y.begin() + (i + 1) * rows);
      streams_.begin_micro_batch(i);
      Tensor l = loss(xi_, yi_);
      losses.push_back(l.item());
      reducer_.backward(l);
    }
    reducer_.finish_step();
    const double mean = reducer_.mean_loss(losses);
    streams_.end_step();
    return mean;
  } catch (const dist::Stopped&) {
    // The step is abandoned: the parameters and the optimizer are still as it found them, and so
    // must the generators be, for the checkpoint rank 0 saves next.
    data_gen.set_state(data_at_start);
    for (size_t k = 0; k < dropout_.size(); ++k) dropout_[k]->set_state(dropout_at_start[k]);
    throw;
  }
}

double shared_mean_loss(dist::Communicator& world, int64_t count, const std::function<void(int64_t)>& draw,
                        const std::function<double(int64_t)>& loss_of) {
  const dist::Span share = dist::share_of(count, world.rank(), world.size());
  std::vector<double> mine;
  for (int64_t k = 0; k < count; ++k) {
    world.check_stop();
    draw(k);
    if (k >= share.lo && k < share.hi) mine.push_back(loss_of(k));
  }
  return dist::mean_in_order(world, mine, count);
}

}  // namespace heed::cli
