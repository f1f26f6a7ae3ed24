#include "train_options.h"

#include <cmath>

#include "commands.h"
#include "precision.h"

namespace heed::cli {

namespace {

using O = TrainOptions;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Sizes up to what a GPT checkpoint may hold (nn/gpt_checkpoint.cpp), so every run can be loaded.
const Range kLayers{1, 1 << 10}, kWidth{1, 1 << 16}, kBlock{1, 1 << 20};
const Range kCount{1, double(kMaxIters)}, kIters{0, double(kMaxIters)};
const Range kUnit{0, 1, false, true};  // [0, 1)

// The rows train and bench share: the model, the recipe, and how the process runs.
OptionTable<O> model_and_recipe() {
  return {
      {"data", "data", {}, &O::data, std::string(), {}, "UTF-8 text file to train on (default: the bundled tiny shakespeare)",
       Role::recipe, true},
      {"n-layer", "n_layer", {}, &O::n_layer, int64_t(4), kLayers, "Transformer blocks"},
      {"n-head", "n_head", {}, &O::n_head, int64_t(4), kWidth, "attention heads per block"},
      {"n-embd", "n_embd", {}, &O::n_embd, int64_t(128), kWidth, "embedding width (divisible by --n-head)"},
      {"block-size", "block_size", {}, &O::block_size, int64_t(64), kBlock, "context length in characters"},
      {"dropout", "dropout", {}, &O::dropout, 0.0, kUnit, "dropout probability in [0, 1)"},
      {"bias", "bias", {}, &O::bias, false, {}, "biases in Linear and LayerNorm layers"},
      {"batch-size", "batch_size", {}, &O::batch_size, int64_t(12), {1, double(1 << 30)},
       "sequences per batch (per micro-batch with --grad-accum)"},
      {"grad-accum", "grad_accum", {"gradient_accumulation_steps"}, &O::grad_accum, int64_t(1), {1, double(1 << 20)},
       "micro-batches of --batch-size per optimizer step (mpirun -np N shares them: N must divide it)", Role::recipe,
       false, false, /*added_later=*/true},
      {"lr", "lr", {"learning_rate"}, &O::lr, 1e-3, {0, kInf, true}, "peak learning rate"},
      {"min-lr", "min_lr", {}, &O::min_lr, 1e-4, {0, kInf}, "final learning rate of the cosine decay (at most --lr)"},
      {"warmup-iters", "warmup_iters", {}, &O::warmup_iters, int64_t(100), kIters, "linear warm-up steps"},
      {"lr-decay-iters", "lr_decay_iters", {}, &O::lr_decay_iters, int64_t(2000), kCount,
       "step at which the cosine decay reaches --min-lr (more than --warmup-iters)"},
      {"weight-decay", "weight_decay", {}, &O::weight_decay, 0.1, {0, kInf}, "AdamW weight decay (2-D tensors only)"},
      {"beta1", "beta1", {}, &O::beta1, 0.9, kUnit, "AdamW beta1"},
      {"beta2", "beta2", {}, &O::beta2, 0.99, kUnit, "AdamW beta2"},
      {"grad-clip", "grad_clip", {}, &O::grad_clip, 1.0, {0, kInf}, "clip the global gradient norm to this (0: off)"},
      {"seed", "seed", {}, &O::seed, int64_t(1337), {0, kInf}, "random seed (initialisation, batches, dropout)"},
      {"threads", "threads", {}, &O::threads, int64_t(0), {0, double(kMaxThreads)},
       "threads for matrix products and kernels (0: all cores)", Role::local},
      {"profile", "profile", {}, &O::profile, false, {},
       "print time per op (forward/backward) and the GEMM share at the end", Role::local},
      {"overlap", "overlap", {}, &O::overlap, true, {},
       "under mpirun: reduce gradients while backward runs (--no-overlap: after it)", Role::local},
      precision_option(&O::precision, Role::recipe),
  };
}

OptionTable<O> make_train_table() {
  OptionTable<O> t = model_and_recipe();
  const OptionTable<O> more = {
      {"out", "out", {"out_dir"}, &O::out, std::string("out"), {},
       "run directory: model.safetensors, train_state.safetensors, log.jsonl, config.toml", Role::local, true},
      {"init-from", "init_from", {}, &O::init_from, std::string(), {},
       "fine-tune this checkpoint (heed's model.safetensors or a nanoGPT-named PyTorch one): its architecture and "
       "vocabulary, this run's recipe from iteration 0",
       Role::recipe, true, false, /*added_later=*/true},
      {"max-iters", "max_iters", {}, &O::max_iters, int64_t(2000), kIters, "training iterations", Role::length},
      {"eval-interval", "eval_interval", {}, &O::eval_interval, int64_t(250), kCount,
       "evaluate and checkpoint every N iterations"},
      {"eval-iters", "eval_iters", {}, &O::eval_iters, int64_t(20), kCount,
       "batches per split in each evaluation (20: nanoGPT's CPU command)"},
      {"keep-best", "keep_best", {}, &O::keep_best, false, {},
       "also keep the checkpoint of the lowest val loss as best.safetensors, beside the latest "
       "(nanoGPT's always_save_checkpoint = False)",
       Role::recipe, false, false, /*added_later=*/true},
      {"log-interval", "log_interval", {}, &O::log_interval, int64_t(10), kCount,
       "log the batch loss, lr and tok/s to log.jsonl every N iterations (and print them when not a terminal)", Role::local},
      {"sample-tokens", "sample_tokens", {}, &O::sample_tokens, int64_t(300), {0, double(kMaxSampleTokens)},
       "characters to sample at the end", Role::local},
  };
  t.insert(t.end(), more.begin(), more.end());
  return t;
}

OptionTable<O> make_bench_table() {
  OptionTable<O> t = model_and_recipe();
  t.push_back({"iters", "iters", {}, &O::bench_iters, int64_t(20), {1, 1e6}, "timed iterations (after 3 warm-up ones)",
               Role::local});
  return t;
}

}  // namespace

const OptionTable<TrainOptions>& train_option_table() {
  static const OptionTable<TrainOptions> table = make_train_table();
  return table;
}

const OptionTable<TrainOptions>& bench_option_table() {
  static const OptionTable<TrainOptions> table = make_bench_table();
  return table;
}

void validate(const TrainOptions& o, const OptionTable<TrainOptions>& table) {
  check_ranges(table, o);
  auto require = [](bool ok, const std::string& msg) {
    if (!ok) throw UsageError(msg);
  };
  require(o.n_embd % o.n_head == 0, "--n-embd " + std::to_string(o.n_embd) + " is not divisible by --n-head " +
                                        std::to_string(o.n_head));
  require(o.min_lr <= o.lr, "--min-lr " + format_value(o.min_lr) + ": must be in [0, --lr " + format_value(o.lr) + "]");
  require(o.lr_decay_iters > o.warmup_iters, "--lr-decay-iters " + std::to_string(o.lr_decay_iters) +
                                                 ": must be greater than --warmup-iters " +
                                                 std::to_string(o.warmup_iters));
  // The schedule computes lr * (it + 1) during the warm-up, as nanoGPT does: that product must be
  // finite at its largest, else the run would fail at the first step rather than here.
  require(std::isfinite(o.lr * static_cast<double>(o.warmup_iters + 1)),
          "--lr " + format_value(o.lr) + " is too large: the warm-up's lr x (--warmup-iters + 1) = lr x " +
              std::to_string(o.warmup_iters + 1) + " overflows");
  precision_is_bf16(o.precision);  // fp32 or bf16, and bf16 only where the CPU has it
}

nn::GPTConfig gpt_config(const TrainOptions& o, int64_t vocab_size) {
  nn::GPTConfig c;
  c.vocab_size = vocab_size;
  c.block_size = o.block_size;
  c.n_layer = o.n_layer;
  c.n_head = o.n_head;
  c.n_embd = o.n_embd;
  c.dropout = o.dropout;
  c.bias = o.bias;
  return c;
}

}  // namespace heed::cli
