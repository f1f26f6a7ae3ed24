// `heed sample` and `heed eval`: generation and held-out loss from a checkpoint.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/autocast.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "corpus.h"
#include "io.h"
#include "load_model.h"
#include "nn/gpt_checkpoint.h"
#include "precision.h"
#include "resources.h"
#include "stop.h"
#include "train_options.h"

namespace heed::cli {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The most one evaluation batch may take: tokens (small models run far below the machine's peak:
// 1 layer x 16 wide evaluates ~90k tokens/s on one core), work (multiply-adds x 2) and activation
// memory. Each keeps a batch near a tenth of a second on one core, so a stop waits no longer.
constexpr double kEvalBatchTokens = 16384;
constexpr double kEvalBatchFlops = 2e9;
constexpr double kEvalBatchBytes = 256.0 * (1 << 20);

OptionTable<SampleOptions> make_sample_table() {
  using S = SampleOptions;
  return {
      {"checkpoint", "checkpoint", {}, &S::checkpoint, std::string(), {},
       "model.safetensors written by heed train (or PyTorch)", Role::local, true, true},
      {"prompt", "prompt", {}, &S::prompt, std::string(), {}, "text to continue (default: a newline)", Role::local},
      {"prompt-file", "prompt_file", {}, &S::prompt_file, std::string(), {},
       "read the prompt from this file, byte for byte (instead of --prompt)", Role::local, true},
      {"tokens", "tokens", {"max_new_tokens"}, &S::tokens, int64_t(500), {0, double(kMaxSampleTokens)},
       "characters to generate per sample", Role::local},
      {"num-samples", "num_samples", {}, &S::num_samples, int64_t(1), {1, double(kMaxSamples)},
       "samples to draw, one after another from one random stream (as nanoGPT's sample.py)", Role::local},
      {"stop", "stop", {}, &S::stop, std::string(), {},
       "end a sample as soon as it has generated this text (which is printed)", Role::local},
      {"temperature", "temperature", {}, &S::temperature, 0.8, {0, kInf}, "softmax temperature (0: greedy argmax)",
       Role::local},
      {"top-k", "top_k", {}, &S::top_k, int64_t(200), {0, kInf}, "sample among the k most likely characters (0: all)",
       Role::local},
      {"seed", "seed", {}, &S::seed, int64_t(1337), {0, kInf}, "random seed", Role::local},
      {"threads", "threads", {}, &S::threads, int64_t(0), {0, double(kMaxThreads)}, "threads (0: all cores)", Role::local},
      precision_option(&S::precision, Role::local),
  };
}

OptionTable<EvalOptions> make_eval_table() {
  using E = EvalOptions;
  return {
      {"checkpoint", "checkpoint", {}, &E::checkpoint, std::string(), {}, "model.safetensors", Role::local, true, true},
      {"data", "data", {}, &E::data, std::string(), {}, "UTF-8 text file", Role::local, true, true},
      {"batch-size", "batch_size", {}, &E::batch_size, int64_t(64), {1, kInf},
       "windows per forward pass at most (fewer if memory or a batch's time bound needs; the result changes only past the 10th digit)", Role::local},
      {"threads", "threads", {}, &E::threads, int64_t(0), {0, double(kMaxThreads)}, "threads (0: all cores)", Role::local},
      precision_option(&E::precision, Role::local),
  };
}

}  // namespace

const OptionTable<SampleOptions>& sample_option_table() {
  static const OptionTable<SampleOptions> table = make_sample_table();
  return table;
}

const OptionTable<EvalOptions>& eval_option_table() {
  static const OptionTable<EvalOptions> table = make_eval_table();
  return table;
}

int run_sample(const SampleOptions& o) {
  check_ranges(sample_option_table(), o);
  const AutocastBF16 autocast(precision_is_bf16(o.precision));
  apply_threads(o.threads);
  LoadedModel m = load_model(o.checkpoint);
  const nn::GPTConfig& c = m.model->config();
  require_memory(gpt_loading_bytes(c) + gpt_forward_bytes_per_row(c, c.block_size) + 8.0 * double(o.tokens),
                 o.checkpoint + " sampling " + std::to_string(o.tokens) + " characters", false);
  if (!o.prompt.empty() && !o.prompt_file.empty()) throw UsageError("--prompt and --prompt-file exclude each other");
  const std::string prompt = o.prompt_file.empty() ? o.prompt : read_input_file(o.prompt_file, 9.0);
  const std::string prompt_name = o.prompt_file.empty() ? std::string("--prompt") : o.prompt_file;
  const std::vector<int32_t> ids = prompt.empty() ? std::vector<int32_t>{m.vocab.start_id()}
                                                  : m.vocab.encode(decode_utf8(prompt, prompt_name), prompt_name);
  nn::GenerateOptions g;
  g.max_new_tokens = o.tokens;
  g.temperature = o.temperature;
  g.top_k = o.top_k;
  if (!o.stop.empty()) g.stop_sequences.push_back(m.vocab.encode(decode_utf8(o.stop, "--stop"), "--stop"));
  g.on_token = [&](int64_t, int32_t id) {
    write_stdout_token(m.vocab.decode(id));  // byte for byte: a NUL in the vocabulary is written too
    check_stop();
    return true;
  };
  Generator gen(static_cast<uint64_t>(o.seed));
  g.generator = &gen;
  for (int64_t s = 0; s < o.num_samples; ++s) {
    write_stdout(prompt);
    m.model->generate(ids, g);
    write_stdout("\n");
    if (o.num_samples > 1) write_stdout(std::string(kSampleSeparator) + "\n");
  }
  return 0;
}

int run_eval(const EvalOptions& o) {
  check_ranges(eval_option_table(), o);
  if (o.data.empty()) throw UsageError("--data is required");
  const AutocastBF16 autocast(precision_is_bf16(o.precision));
  apply_threads(o.threads);
  LoadedModel m = load_model(o.checkpoint);
  const nn::GPTConfig& c = m.model->config();
  const int64_t B = c.block_size;
  // The text (bytes, code points, ids: 9 bytes per byte at most) and at least one window.
  const std::vector<int32_t> ids = m.vocab.encode(decode_utf8(read_input_file(o.data, 9.0), o.data), o.data);
  const int64_t n = static_cast<int64_t>(ids.size());
  HEED_CHECK(n >= B + 1, o.data, ": ", n, " characters are too few for one window of block_size ", B,
             " (needs at least ", B + 1, ")");
  // Consecutive non-overlapping windows x = text[s:s+B], y = text[s+1:s+B+1], s = 0, B, 2B, ...
  const int64_t windows = (n - 1) / B;
  // Batches of --batch-size windows, fewer if memory needs, and never more than the kEvalBatch*
  // bounds: a stop signal is checked between batches, so one batch must be a fraction of a
  // second whatever the flags say.
  const double fixed = gpt_loading_bytes(c) + 9.0 * double(n);
  const double per_row = gpt_forward_bytes_per_row(c, B);
  require_memory(fixed + per_row, o.checkpoint + " evaluating windows of " + std::to_string(B) + " characters", false);
  const double room = (double(memory_limit()) - fixed) / per_row;
  const double flops_per_row =
      double(B) * (2.0 * gpt_parameters(c) + 4.0 * double(c.n_layer) * double(B) * double(c.n_embd));
  const int64_t rows_per_batch = std::max<int64_t>(
      1, std::min<double>({double(o.batch_size), double(windows), room, kEvalBatchTokens / double(B),
                           kEvalBatchFlops / flops_per_row, kEvalBatchBytes / per_row}));
  NoGradGuard no_grad;
  // Each token's loss is summed in double from its own logits, in text order, so batching changes
  // only what float32 matrix products do with another number of rows (past the 10th digit).
  double total = 0;
  const int64_t V = c.vocab_size;
  std::vector<int32_t> x, y;
  for (int64_t w0 = 0; w0 < windows; w0 += rows_per_batch) {
    check_stop();
    const int64_t rows = std::min(rows_per_batch, windows - w0);
    x.clear();
    y.clear();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t s = (w0 + r) * B;
      x.insert(x.end(), ids.begin() + s, ids.begin() + s + B);
      y.insert(y.end(), ids.begin() + s + 1, ids.begin() + s + B + 1);
    }
    const Tensor logits = m.model->forward(x, rows, B).contiguous();  // (rows, B, V)
    const float* z = logits.data<float>();
    for (int64_t t = 0; t < rows * B; ++t, z += V) {
      const float top = *std::max_element(z, z + V);
      double sum_exp = 0;
      for (int64_t v = 0; v < V; ++v) sum_exp += std::exp(double(z[v]) - double(top));
      total += double(top) + std::log(sum_exp) - double(z[y[static_cast<size_t>(t)]]);
    }
  }
  const int64_t tokens = windows * B;
  const nlohmann::json out = {{"loss", total / double(tokens)}, {"tokens", tokens}};
  write_stdout(out.dump() + "\n");
  return 0;
}

}  // namespace heed::cli
