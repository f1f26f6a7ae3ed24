// `heed sample` and `heed eval`: generation and held-out loss from a checkpoint.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "corpus.h"
#include "generate.h"
#include "nn/gpt_checkpoint.h"

namespace heed::cli {

struct LoadedModel {
  std::shared_ptr<nn::GPT> model;
  Vocab vocab;
};

static LoadedModel load_model(const std::string& path) {
  if (path.empty()) throw UsageError("--checkpoint is required");
  nn::LoadedGPT loaded = nn::load_gpt_checkpoint(path);
  const std::u32string chars = decode_utf8(loaded.vocab_utf8, path + ": metadata \"vocab\"");
  HEED_CHECK(static_cast<int64_t>(chars.size()) == loaded.model->config().vocab_size, path,
             ": metadata \"vocab\" has ", chars.size(), " characters but config vocab_size is ",
             loaded.model->config().vocab_size);
  LoadedModel m{loaded.model, Vocab(chars)};
  m.model->eval();
  return m;
}

int run_sample(const SampleOptions& o) {
  if (o.tokens < 0) throw UsageError("--tokens must not be negative");
  if (o.tokens > kMaxSampleTokens)
    throw UsageError("--tokens " + std::to_string(o.tokens) + " is more than one run generates (at most " +
                     std::to_string(kMaxSampleTokens) + ")");
  if (!std::isfinite(o.temperature) || o.temperature < 0) throw UsageError("--temperature must be a number >= 0 (0: greedy)");
  if (o.top_k < 0) throw UsageError("--top-k must not be negative (0: no limit)");
  apply_threads(o.threads);
  LoadedModel m = load_model(o.checkpoint);
  std::vector<int32_t> ids;
  if (o.prompt.empty()) {
    ids.push_back(m.vocab.start_id());
  } else {
    ids = m.vocab.encode(decode_utf8(o.prompt, "--prompt"), "--prompt");
    std::fputs(o.prompt.c_str(), stdout);
  }
  std::fflush(stdout);
  Generator gen(o.seed);
  generate(*m.model, ids, o.tokens, o.temperature, o.top_k, gen, [&](int32_t id) {
    std::fputs(m.vocab.decode(id).c_str(), stdout);
    std::fflush(stdout);
  });
  std::fputs("\n", stdout);
  return 0;
}

int run_eval(const EvalOptions& o) {
  if (o.data.empty()) throw UsageError("--data is required");
  if (o.batch_size < 1) throw UsageError("--batch-size must be at least 1");
  apply_threads(o.threads);
  LoadedModel m = load_model(o.checkpoint);
  const std::vector<int32_t> ids = m.vocab.encode(decode_utf8(read_file(o.data), o.data), o.data);
  const int64_t B = m.model->config().block_size;
  const int64_t n = static_cast<int64_t>(ids.size());
  HEED_CHECK(n >= B + 1, o.data, ": ", n, " characters are too few for one window of block_size ", B,
             " (needs at least ", B + 1, ")");
  // Consecutive non-overlapping windows x = text[s:s+B], y = text[s+1:s+B+1], s = 0, B, 2B, ...
  const int64_t windows = (n - 1) / B;
  NoGradGuard no_grad;
  double total = 0;
  std::vector<int32_t> x, y;
  for (int64_t w0 = 0; w0 < windows; w0 += o.batch_size) {
    const int64_t rows = std::min(o.batch_size, windows - w0);
    x.clear();
    y.clear();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t s = (w0 + r) * B;
      x.insert(x.end(), ids.begin() + s, ids.begin() + s + B);
      y.insert(y.end(), ids.begin() + s + 1, ids.begin() + s + B + 1);
    }
    // the loss is a mean over rows*B tokens; weight it back to a sum
    total += m.model->loss(x, y, rows, B).item() * double(rows * B);
  }
  const int64_t tokens = windows * B;
  nlohmann::json out = {{"loss", total / double(tokens)}, {"tokens", tokens}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace heed::cli
