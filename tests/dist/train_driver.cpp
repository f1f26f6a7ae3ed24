// heed_dist_train: a small data-parallel training program over the dist/ library, for the tests
// (tests/dist/test_mpi_train.cpp runs it under mpirun and alone) and the measurements of
// docs/scaling.md. It is what `heed train --grad-accum A` under `mpirun -np N` will do, minus the
// command line's checkpoints and logs:
//
//   every step: draw the global batch (A micro-batches of --batch windows) from one generator on
//   every rank, run this rank's micro-batches through dist::GradReducer, clip, AdamW, and compare
//   the parameters' checksums across ranks; at the end, a shared evaluation.
//
// Rank 0 prints "step S loss L" per step (L with 17 digits), "eval L", and a last JSON line with
// the timings; with --out FILE it writes the parameters (safetensors). Model and run flags:
// --n-layer --n-head --n-embd --block --batch --dropout --accum (A, default N) --steps --threads
// --overlap 0|1 --bucket-bytes --eval-batches --check-every (steps between checksums) --warmup. Flags for the failure
// tests: --die-rank R --die-step S (SIGKILL itself), --fail-rank R --fail-step S (a heed::Error),
// --corrupt-rank R (changes one weight, which the checksum must catch). A stop signal
// (dist::stop_signals(): under mpirun, Ctrl-C arrives as SIGCONT) abandons the step in progress
// on every rank (dist::Stopped); rank 0 saves the state that step started from (--out)
// and every rank exits with 130 at once: mpirun sends SIGKILL two seconds after Ctrl-C.
#include <malloc.h>
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "core/autograd.h"
#include "core/parallel.h"
#include "corpus.h"
#include "dist/grad_reducer.h"
#include "dist/micro_batch_generators.h"
#include "dist/param_checksum.h"
#include "dist/runtime.h"
#include "dist/shared_eval.h"
#include "nn/gpt.h"
#include "nn/safetensors.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "io.h"
#include "profile.h"
#include "train_state.h"

using namespace heed;

namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int sig) {
  if (!g_stop) g_stop = sig;  // the first: mpirun's SIGTERM follows its SIGCONT
}

struct Flags {
  int64_t steps = 6, accum = 0, batch = 4, block = 32, n_layer = 2, n_head = 2, n_embd = 32;
  int64_t eval_batches = 5, warmup = 1, corpus_chars = 100000, check_every = 1;
  int64_t bucket_bytes = int64_t(4) << 20;
  double dropout = 0.1;
  int threads = 1;
  bool overlap = true;
  std::string out;
  int die_rank = -1, die_step = -1, fail_rank = -1, fail_step = -1, corrupt_rank = -1;
};

Flags parse(int argc, char** argv) {
  Flags f;
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    HEED_CHECK(key.rfind("--", 0) == 0 && i + 1 < argc, "usage: heed_dist_train [--flag value]... (got '", key, "')");
    kv[key.substr(2)] = argv[++i];
  }
  auto take = [&](const char* name, auto& field) {
    auto it = kv.find(name);
    if (it == kv.end()) return;
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::string>) field = it->second;
    else if constexpr (std::is_same_v<std::decay_t<decltype(field)>, bool>) field = it->second == "1";
    else if constexpr (std::is_same_v<std::decay_t<decltype(field)>, double>) field = std::stod(it->second);
    else field = static_cast<std::decay_t<decltype(field)>>(std::stoll(it->second));
    kv.erase(it);
  };
  take("steps", f.steps), take("accum", f.accum), take("batch", f.batch), take("block", f.block);
  take("n-layer", f.n_layer), take("n-head", f.n_head), take("n-embd", f.n_embd);
  take("eval-batches", f.eval_batches), take("warmup", f.warmup), take("corpus-chars", f.corpus_chars);
  take("check-every", f.check_every);
  take("bucket-bytes", f.bucket_bytes), take("dropout", f.dropout), take("threads", f.threads);
  take("overlap", f.overlap), take("out", f.out), take("die-rank", f.die_rank), take("die-step", f.die_step);
  take("fail-rank", f.fail_rank), take("fail-step", f.fail_step), take("corrupt-rank", f.corrupt_rank);
  HEED_CHECK(kv.empty(), "heed_dist_train: unknown flag --", kv.empty() ? "" : kv.begin()->first);
  return f;
}

// Whether Open MPI's library is mapped into this process (a plain run must not load it).
bool mpi_loaded() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libmpi.so") != std::string::npos) return true;
  return false;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int run(dist::Communicator& world, const Flags& f) {
  const int rank = world.rank(), N = world.size();
  const int64_t A = f.accum > 0 ? f.accum : N;
  set_num_threads(f.threads);

  std::string text = cli::read_input_file(cli::default_corpus_path());
  text.resize(std::min<size_t>(text.size(), f.corpus_chars));
  const std::u32string chars = cli::decode_utf8(text, "corpus");
  const cli::Vocab vocab = cli::Vocab::from_text(chars);
  const std::vector<int32_t> ids = vocab.encode(chars, "corpus");
  const std::vector<int32_t> train(ids.begin(), ids.begin() + ids.size() * 9 / 10), val(ids.begin() + ids.size() * 9 / 10, ids.end());

  nn::GPTConfig cfg;
  cfg.vocab_size = vocab.size();
  cfg.block_size = f.block;
  cfg.n_layer = f.n_layer;
  cfg.n_head = f.n_head;
  cfg.n_embd = f.n_embd;
  cfg.dropout = f.dropout;
  nn::GPT model(cfg, 1337);
  model.train();
  optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), 0.1), 1e-3, 0.9, 0.99);
  dist::GradReducer reducer(model.parameters(), world,
                            {.micro_batches = A, .overlap = f.overlap, .bucket_bytes = f.bucket_bytes});
  std::vector<Generator*> gens;
  for (auto& [path, g] : cli::dropout_generators(model)) gens.push_back(g);
  dist::MicroBatchGenerators streams(gens, A, N);
  if (rank == f.corrupt_rank) model.parameters()[1].data<float>()[0] += 1e-3f;

  if (rank == 0)
    std::printf("ranks %d micro_batches %lld batch %lld mpi_loaded %s\n", N, (long long)A, (long long)f.batch,
                mpi_loaded() ? "yes" : "no");
  Generator data_gen(1337);
  std::vector<int32_t> x, y;
  std::vector<double> step_s, in_backward_s, after_backward_s, finish_s;
  int64_t bytes_sent = 0;
  auto save = [&] {
    if (rank != 0 || f.out.empty()) return;
    std::vector<std::pair<std::string, Tensor>> tensors(model.named_parameters());
    nn::save_safetensors(f.out, tensors, {});
  };
  // A stop (a signal, or a wait that gave up: dist::Stopped) saves the state the current step
  // started from: the parameters and the optimizer are untouched until opt.step(), and the
  // generators are put back as the step found them.
  Generator::State data_at_start = data_gen.state();
  std::vector<Generator::State> dropout_at_start;
  for (Generator* g : gens) dropout_at_start.push_back(g->state());
  auto stop = [&](int64_t s) {
    data_gen.set_state(data_at_start);  // (a trainer saves these with the weights)
    for (size_t k = 0; k < gens.size(); ++k) gens[k]->set_state(dropout_at_start[k]);
    save();
    if (rank == 0)
      std::printf("stopped by signal %d in step %lld; saved the state it started from\n", int(g_stop), (long long)s);
    // No MPI_Finalize: mpirun is already ending the job, and finalizing then takes seconds
    // (2.4 s measured) that its SIGKILL may not leave.
    std::fflush(stdout);
    std::_Exit(130);
  };
  world.set_stop_check([] { return g_stop != 0; });
  for (int64_t s = 0; s < f.steps; ++s) {
    data_at_start = data_gen.state();
    for (size_t k = 0; k < gens.size(); ++k) dropout_at_start[k] = gens[k]->state();
    if (g_stop) stop(s);
    if (rank == f.die_rank && s == f.die_step) {
      std::fprintf(stderr, "rank %d: SIGKILL at %.3f s (steady clock)\n", rank, cli::now_s());
      std::fflush(stderr);
      ::raise(SIGKILL);
    }
    HEED_CHECK(!(rank == f.fail_rank && s == f.fail_step), "rank ", rank, " failed on purpose at step ", s);
    const double t0 = cli::now_s();
    double loss = 0;
    try {
      if (s % f.check_every == 0) dist::require_same_parameters(world, model.named_parameters());  // as the step starts
      opt.set_lr(s < 2 ? 1e-3 * (s + 1) / 2 : 1e-3);
      cli::sample_batch(train, A * f.batch, f.block, data_gen, x, y);  // the global batch, on every rank
      std::vector<double> losses;
      const dist::Span mine = reducer.local_micro_batches();
      for (int64_t i = mine.lo; i < mine.hi; ++i) {
        const std::vector<int32_t> xi(x.begin() + i * f.batch * f.block, x.begin() + (i + 1) * f.batch * f.block);
        const std::vector<int32_t> yi(y.begin() + i * f.batch * f.block, y.begin() + (i + 1) * f.batch * f.block);
        streams.begin_micro_batch(i);
        Tensor l = model.loss(xi, yi, f.batch, f.block);
        losses.push_back(l.item());
        reducer.backward(l);
      }
      reducer.finish_step();
      loss = reducer.mean_loss(losses);
    } catch (const dist::Stopped&) {
      stop(s);
    }
    streams.end_step();
    optim::clip_grad_norm(model.parameters(), 1.0);
    opt.step();
    model.zero_grad();
    if (s >= f.warmup) {
      step_s.push_back(cli::now_s() - t0);
      const dist::ReducerTimes& t = reducer.last_times();
      in_backward_s.push_back(t.in_backward);
      after_backward_s.push_back(t.after_backward);
      finish_s.push_back(t.finish);
      bytes_sent = t.bytes_sent;
    }
    if (rank == 0) std::printf("step %lld loss %.17g\n", (long long)s, loss);
    std::fflush(stdout);
  }
  data_at_start = data_gen.state();
  for (size_t k = 0; k < gens.size(); ++k) dropout_at_start[k] = gens[k]->state();
  try {
    dist::require_same_parameters(world, model.named_parameters());
  } catch (const dist::Stopped&) {
    stop(f.steps);
  }

  {  // the shared evaluation: every rank draws every batch, computes its share
    NoGradGuard no_grad;
    model.eval();
    Generator eval_gen(4242);
    const dist::Span share = dist::share_of(f.eval_batches, rank, N);
    std::vector<double> mine;
    for (int64_t k = 0; k < f.eval_batches; ++k) {
      cli::sample_batch(val, f.batch, f.block, eval_gen, x, y);
      if (k >= share.lo && k < share.hi) mine.push_back(model.loss(x, y, f.batch, f.block).item());
    }
    double eval = 0;
    try {
      eval = dist::mean_in_order(world, mine, f.eval_batches);
    } catch (const dist::Stopped&) {
      stop(f.steps);
    }
    if (rank == 0) std::printf("eval %.17g\n", eval);
  }
  save();
  if (rank == 0) {
    const double ms = median(step_s) * 1e3;
    nlohmann::json j = {{"ranks", N},
                        {"micro_batches", A},
                        {"threads", f.threads},
                        {"overlap", f.overlap},
                        {"buckets", reducer.bucket_count()},
                        {"ms_per_step", ms},
                        {"tokens_per_s", ms > 0 ? A * f.batch * f.block / (ms / 1e3) : 0.0},
                        {"in_backward_ms", median(in_backward_s) * 1e3},
                        {"after_backward_ms", median(after_backward_s) * 1e3},
                        {"finish_ms", median(finish_s) * 1e3},
                        {"bytes_sent_per_step", bytes_sent},
                        {"params", model.num_params(false)}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);  // as heed's main: keep freed pages in the process
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  for (int sig : dist::stop_signals()) std::signal(sig, on_stop_signal);
  try {
    dist::Runtime runtime;
    try {
      return run(runtime.world(), parse(argc, argv));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "heed: error: rank %d of %d: %s\n", runtime.world().rank(), runtime.world().size(),
                   e.what());
      std::fflush(stderr);
      if (runtime.distributed()) runtime.world().abort(1);  // end the other ranks now
      return 1;
    }
  } catch (const std::exception& e) {  // the runtime itself could not start
    std::fprintf(stderr, "heed: error: %s\n", e.what());
    return 1;
  }
}
