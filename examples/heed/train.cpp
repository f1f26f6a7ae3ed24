// `heed train` and `heed bench`: nanoGPT's shakespeare_char recipe (AdamW with weight decay on
// 2-D tensors, linear warm-up then cosine decay, gradient clipping, random batches), with atomic
// checkpoints, an exact --resume, a clean stop on SIGINT/SIGTERM, and an op profile.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "corpus.h"
#include "generate.h"
#include "nn/gpt.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "profile.h"
#include "run_state.h"

namespace heed::cli {

using nlohmann::json;
namespace fs = std::filesystem;


static void require_usage(bool ok, const std::string& msg) {
  if (!ok) throw UsageError(msg);
}

void validate(const TrainOptions& o) {
  require_usage(o.n_layer >= 1, "--n-layer must be at least 1");
  require_usage(o.n_head >= 1, "--n-head must be at least 1");
  require_usage(o.n_embd >= 1, "--n-embd must be at least 1");
  require_usage(o.n_embd % o.n_head == 0, "--n-embd " + std::to_string(o.n_embd) +
                                              " is not divisible by --n-head " + std::to_string(o.n_head));
  require_usage(o.block_size >= 1, "--block-size must be at least 1");
  require_usage(o.batch_size >= 1, "--batch-size must be at least 1");
  require_usage(o.dropout >= 0.0 && o.dropout < 1.0, "--dropout must be in [0, 1)");
  require_usage(o.max_iters >= 0, "--max-iters must not be negative");
  require_usage(std::isfinite(o.lr) && o.lr > 0, "--lr must be a positive number");
  require_usage(std::isfinite(o.min_lr) && o.min_lr >= 0 && o.min_lr <= o.lr, "--min-lr must be in [0, --lr]");
  require_usage(o.warmup_iters >= 0, "--warmup-iters must not be negative");
  require_usage(o.lr_decay_iters > o.warmup_iters, "--lr-decay-iters must be greater than --warmup-iters");
  require_usage(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay must not be negative");
  require_usage(o.beta1 >= 0 && o.beta1 < 1, "--beta1 must be in [0, 1)");
  require_usage(o.beta2 >= 0 && o.beta2 < 1, "--beta2 must be in [0, 1)");
  require_usage(std::isfinite(o.grad_clip) && o.grad_clip >= 0, "--grad-clip must not be negative (0 disables)");
  require_usage(o.eval_interval >= 1, "--eval-interval must be at least 1");
  require_usage(o.eval_iters >= 1, "--eval-iters must be at least 1");
  require_usage(o.log_interval >= 1, "--log-interval must be at least 1");
  check_threads_flag(o.threads);  // early too: before --out is created
  require_usage(o.sample_tokens >= 0, "--sample-tokens must not be negative");
  // Sizes that would not fit in memory are refused up front rather than failing mid-run.
  const double params = 12.0 * o.n_layer * double(o.n_embd) * o.n_embd;
  const double acts = double(o.batch_size) * o.block_size * (o.n_layer * (16.0 * o.n_embd + 2.0 * o.n_head * o.block_size));
  if (!(params * 16 + acts * 4 < 16e9)) {
    char gb[32];
    std::snprintf(gb, sizeof gb, "%.3g", (params * 16 + acts * 4) / 1e9);
    throw UsageError("model and batch sizes too large for this machine: --n-layer " + std::to_string(o.n_layer) +
                     " --n-embd " + std::to_string(o.n_embd) + " --n-head " + std::to_string(o.n_head) +
                     " --block-size " + std::to_string(o.block_size) + " --batch-size " + std::to_string(o.batch_size) +
                     " need about " + gb + " GB (at most 16)");
  }
}

void check_threads_flag(int threads) {
  require_usage(threads >= 0 && threads <= kMaxThreads,
                "--threads " + std::to_string(threads) + " is outside [0, " + std::to_string(kMaxThreads) + "] (0: all cores)");
}

void apply_threads(int threads) {
  check_threads_flag(threads);
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  set_num_threads(threads > 0 ? threads : static_cast<int>(std::max(1L, cpus)));
}

std::string default_corpus_path() {
  for (const char* p : {HEED_SOURCE_DIR "/data/tinyshakespeare.txt", "data/tinyshakespeare.txt"})
    if (fs::exists(p)) return p;
  return HEED_SOURCE_DIR "/data/tinyshakespeare.txt";
}

// ------------------------------------------------------------------------------------------

struct Corpus {
  Vocab vocab;
  std::vector<int32_t> train, val;
};

static Corpus load_corpus(const std::string& path, int64_t block_size) {
  const std::string bytes = read_file(path);
  HEED_CHECK(!bytes.empty(), path, ": the corpus is empty");
  const std::u32string text = decode_utf8(bytes, path);
  Corpus c;
  c.vocab = Vocab::from_text(text);
  std::vector<int32_t> ids = c.vocab.encode(text, path);
  const size_t n_train = static_cast<size_t>(double(ids.size()) * 0.9);  // nanoGPT's 90/10 split
  c.train.assign(ids.begin(), ids.begin() + n_train);
  c.val.assign(ids.begin() + n_train, ids.end());
  for (auto [name, split] : {std::pair{"train", &c.train}, std::pair{"val", &c.val}})
    HEED_CHECK(static_cast<int64_t>(split->size()) > block_size + 1, path, ": the ", name, " split has ",
               split->size(), " characters (of ", ids.size(), " in all), too few for --block-size ", block_size,
               " (needs more than ", block_size + 1, ")");
  return c;
}

static json options_json(const TrainOptions& o) {
  return {{"n_layer", o.n_layer},       {"n_head", o.n_head},
          {"n_embd", o.n_embd},         {"block_size", o.block_size},
          {"dropout", o.dropout},       {"bias", o.bias},
          {"batch_size", o.batch_size}, {"max_iters", o.max_iters},
          {"lr", o.lr},                 {"min_lr", o.min_lr},
          {"warmup_iters", o.warmup_iters}, {"lr_decay_iters", o.lr_decay_iters},
          {"weight_decay", o.weight_decay}, {"beta1", o.beta1},
          {"beta2", o.beta2},           {"grad_clip", o.grad_clip},
          {"eval_interval", o.eval_interval}, {"eval_iters", o.eval_iters},
          {"seed", std::to_string(o.seed)}, {"data", o.data}};
}

static void options_from_json(TrainOptions& o, const json& j, const std::string& what) {
  try {
    o.n_layer = j.at("n_layer"); o.n_head = j.at("n_head"); o.n_embd = j.at("n_embd");
    o.block_size = j.at("block_size"); o.dropout = j.at("dropout"); o.bias = j.at("bias");
    o.batch_size = j.at("batch_size"); o.max_iters = j.at("max_iters"); o.lr = j.at("lr");
    o.min_lr = j.at("min_lr"); o.warmup_iters = j.at("warmup_iters"); o.lr_decay_iters = j.at("lr_decay_iters");
    o.weight_decay = j.at("weight_decay"); o.beta1 = j.at("beta1"); o.beta2 = j.at("beta2");
    o.grad_clip = j.at("grad_clip"); o.eval_interval = j.at("eval_interval"); o.eval_iters = j.at("eval_iters");
    o.seed = std::stoull(j.at("seed").get<std::string>());
    o.data = j.at("data");
  } catch (const std::exception& e) {
    detail::fail(what, ": bad \"options\" metadata (", e.what(), ")");
  }
}

// ------------------------------------------------------------------------------------------
// The training run.

class Trainer {
 public:
  Trainer(TrainOptions o, Corpus corpus)
      : o_(std::move(o)), corpus_(std::move(corpus)), data_gen_(o_.seed) {
    nn::GPTConfig cfg;
    cfg.vocab_size = corpus_.vocab.size();
    cfg.block_size = o_.block_size;
    cfg.n_layer = o_.n_layer;
    cfg.n_head = o_.n_head;
    cfg.n_embd = o_.n_embd;
    cfg.dropout = o_.dropout;
    cfg.bias = o_.bias;
    model_ = std::make_shared<nn::GPT>(cfg, o_.seed);
    model_->train();
    opt_ = std::make_unique<optim::AdamW>(optim::param_groups_nanogpt(model_->named_parameters(), o_.weight_decay),
                                          o_.lr, o_.beta1, o_.beta2);
    params_ = model_->parameters();
  }

  nn::GPT& model() { return *model_; }
  const Corpus& corpus() const { return corpus_; }
  int64_t iter() const { return iter_; }

  double lr_at(int64_t it) const {
    return optim::cosine_lr(it, o_.lr, o_.min_lr, o_.warmup_iters, o_.lr_decay_iters);
  }

  /// One optimisation step; returns the loss. Throws on a non-finite loss or gradient.
  double step() {
    const double lr = lr_at(iter_);
    opt_->set_lr(lr);
    sample_batch(corpus_.train, o_.batch_size, o_.block_size, data_gen_, x_, y_);
    if (profiler_) profiler_->begin_step();
    struct EndStep {  // on every exit, a diverged step's throw included: no timer left installed
      Profiler* p;
      ~EndStep() {
        if (p) p->end_step();
      }
    } end_step{profiler_};
    Tensor loss = model_->loss(x_, y_, o_.batch_size, o_.block_size);
    const double value = loss.item();
    if (!std::isfinite(value))
      detail::fail("training diverged: the loss is ", value, " at iteration ", iter_);
    loss.backward();
    loss = Tensor();
    double t0 = now_s();
    const double norm = o_.grad_clip > 0 ? optim::clip_grad_norm(params_, o_.grad_clip)
                                         : optim::clip_grad_norm(params_, INFINITY);
    if (profiler_) profiler_->add("clip_grad_norm", "step", now_s() - t0);
    if (!std::isfinite(norm))
      detail::fail("training diverged: the gradient norm is ", norm, " at iteration ", iter_);
    t0 = now_s();
    opt_->step();
    model_->zero_grad();
    if (profiler_) profiler_->add("adamw", "step", now_s() - t0);
    ++iter_;
    return value;
  }

  /// Mean loss over eval_iters random batches of each split (nanoGPT's estimate_loss), or
  /// nothing if a stop signal arrives in the middle. With keep_sampler, the batch sampler is left
  /// as it was (the evaluation draws no batch that training will miss).
  bool estimate_loss(double& train_loss, double& val_loss, bool keep_sampler = false) {
    NoGradGuard no_grad;
    model_->eval();
    // An interrupted evaluation must leave the sampler as it was, so that --resume redoes it
    // with the same batches an uninterrupted run would draw.
    const Generator::State before = data_gen_.state();
    double out[2];
    const std::vector<int32_t>* splits[2] = {&corpus_.train, &corpus_.val};
    bool done = true;
    for (int s = 0; s < 2 && done; ++s) {
      double total = 0;
      for (int64_t k = 0; k < o_.eval_iters; ++k) {
        if (g_stop_signal) {
          done = false;
          break;
        }
        sample_batch(*splits[s], o_.batch_size, o_.block_size, data_gen_, x_, y_);
        total += model_->loss(x_, y_, o_.batch_size, o_.block_size).item();
      }
      out[s] = total / double(o_.eval_iters);
    }
    model_->train();
    if (!done || keep_sampler) data_gen_.set_state(before);
    train_loss = out[0];
    val_loss = out[1];
    return done;
  }

  /// Writes train_state.safetensors (weights, moments, generators, recipe), then model.safetensors.
  void save(const std::string& dir, bool eval_done, double elapsed, const json& last_eval) {
    // Never replace a good checkpoint with a diverged model.
    for (auto& [name, t] : model_->named_parameters())
      if (const int64_t i = nn::first_non_finite(t); i >= 0)
        detail::fail("training diverged: parameter '", name, "' is ", t.contiguous().data<float>()[i], " (element ", i,
                     ") at iteration ", iter_, "; not saved");
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (auto& [name, t] : model_->named_parameters()) tensors.emplace_back("model." + name, t);
    for (auto& [name, t] : opt_->state_tensors()) tensors.emplace_back("optim." + name, t);
    json gens = json::object();
    for (auto& [path, g] : dropout_generators(*model_)) gens[path] = encode_generator(*g);
    std::map<std::string, std::string> meta{
        {"iter", std::to_string(iter_)},
        {"eval_done", eval_done ? "true" : "false"},
        {"optimizer_step", std::to_string(opt_->step_count())},
        {"data_rng", encode_generator(data_gen_)},
        {"dropout_rng", gens.dump()},
        {"options", options_json(o_).dump()},
        {"vocab", json(encode_utf8(corpus_.vocab.chars())).dump()},
        {"elapsed_s", std::to_string(elapsed)},
        {"last_eval", last_eval.dump()}};
    nn::save_safetensors(state_path(dir), tensors, meta);
    nn::save_gpt_checkpoint(model_path(dir), *model_, encode_utf8(corpus_.vocab.chars()),
                            {{"iter", std::to_string(iter_)}});
  }

  struct Restored {
    bool eval_done;
    double elapsed;
    json last_eval;
  };
  /// Restores everything save() wrote (the model must have been built from the same options).
  Restored restore(const nn::SafetensorsFile& st, const std::string& what) {
    auto meta = [&](const char* key) -> const std::string& {
      auto it = st.metadata.find(key);
      HEED_CHECK(it != st.metadata.end(), what, ": missing \"", key, "\" in the training state");
      return it->second;
    };
    std::map<std::string, Tensor> by_name(st.tensors.begin(), st.tensors.end());
    NoGradGuard no_grad;
    for (auto& [name, t] : model_->named_parameters()) {
      auto it = by_name.find("model." + name);
      HEED_CHECK(it != by_name.end(), what, ": missing tensor 'model.", name, "'");
      HEED_CHECK(it->second.shape() == t.shape(), what, ": tensor 'model.", name, "' has shape ",
                 to_string(it->second.shape()), ", expected ", to_string(t.shape()));
      t.copy_(it->second);
    }
    std::vector<std::pair<std::string, Tensor>> moments;
    for (auto& [name, t] : st.tensors)
      if (name.rfind("optim.", 0) == 0) moments.emplace_back(name.substr(6), t);
    int64_t opt_step = 0, it = 0;
    try {
      opt_step = std::stoll(meta("optimizer_step"));
      it = std::stoll(meta("iter"));
    } catch (const std::logic_error&) {
      detail::fail(what, ": bad iteration counters in the training state");
    }
    opt_->load_state(moments, opt_step);
    iter_ = it;
    decode_generator(data_gen_, meta("data_rng"), what);
    json gens = json::parse(meta("dropout_rng"), nullptr, false);
    HEED_CHECK(gens.is_object(), what, ": bad \"dropout_rng\"");
    for (auto& [path, g] : dropout_generators(*model_)) {
      HEED_CHECK(gens.contains(path) && gens[path].is_string(), what, ": no random state for dropout '", path, "'");
      decode_generator(*g, gens[path].get<std::string>(), what);
    }
    Restored r;
    r.eval_done = meta("eval_done") == "true";
    r.elapsed = std::atof(meta("elapsed_s").c_str());
    r.last_eval = json::parse(meta("last_eval"), nullptr, false);
    return r;
  }

  void set_profiler(Profiler* p) { profiler_ = p; }

 private:
  TrainOptions o_;
  Corpus corpus_;
  Generator data_gen_;
  std::shared_ptr<nn::GPT> model_;
  std::unique_ptr<optim::AdamW> opt_;
  std::vector<Tensor> params_;
  std::vector<int32_t> x_, y_;
  int64_t iter_ = 0;
  Profiler* profiler_ = nullptr;
};

static std::string format_duration(double s) {
  char buf[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

int run_train(const TrainOptions& flags, const std::string& config_text) {
  TrainOptions o = flags;
  prepare_out_dir(o.out);
  remove_stale_temp_files(o.out);  // left by a run that was killed while saving
  const std::string what_state = state_path(o.out);
  nn::SafetensorsFile state;
  if (o.resume) {
    if (!fs::exists(what_state))
      throw UsageError("--resume: no training state in --out " + o.out + " (" + what_state + " does not exist)");
    state = nn::load_safetensors(what_state);
    auto it = state.metadata.find("options");
    HEED_CHECK(it != state.metadata.end(), what_state, ": missing \"options\"");
    json saved = json::parse(it->second, nullptr, false);
    HEED_CHECK(saved.is_object(), what_state, ": \"options\" is not a JSON object");
    // The run continues with its own recipe: a recipe flag given with a different value would be
    // ignored, so it is refused (--max-iters may change; --threads and --profile are not recipe).
    const json given = options_json(flags);
    for (auto& [key, value] : saved.items()) {
      std::string flag = "--" + key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (key == "max_iters" || !given.contains(key) || given[key] == value ||
          std::find(flags.flags_given.begin(), flags.flags_given.end(), flag) == flags.flags_given.end())
        continue;
      auto show = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
      throw UsageError(flag + " " + show(given[key]) + " differs from the run's " + show(value) +
                       ": --resume continues the recipe saved in " + what_state +
                       " (only --max-iters, --threads and --profile may change)");
    }
    const int64_t max_iters = o.max_iters;
    options_from_json(o, saved, what_state);
    if (flags.max_iters_given) o.max_iters = max_iters;  // extend or shorten a run
  }
  if (o.data.empty()) o.data = default_corpus_path();
  validate(o);
  apply_threads(o.threads);

  Corpus corpus = load_corpus(o.data, o.block_size);
  if (o.resume) {
    auto it = state.metadata.find("vocab");
    HEED_CHECK(it != state.metadata.end() && json::parse(it->second, nullptr, false) ==
                                                 json(encode_utf8(corpus.vocab.chars())),
               o.data, ": the corpus's vocabulary differs from the one the run in ", o.out, " was trained on");
  }
  Trainer trainer(o, std::move(corpus));
  double elapsed0 = 0;
  bool eval_done = false;
  json last_eval;
  if (o.resume) {
    auto r = trainer.restore(state, what_state);
    elapsed0 = r.elapsed;
    eval_done = r.eval_done;
    last_eval = r.last_eval;
    // Lines past the checkpoint (written before a crash) go; the eval at the resume iteration,
    // if it happened, is logged again from the state.
    truncate_log(log_path(o.out), trainer.iter());
    if (eval_done && last_eval.is_object()) append_line(log_path(o.out), last_eval.dump());
    std::printf("resuming %s at iteration %lld of %lld\n", o.out.c_str(), (long long)trainer.iter(),
                (long long)o.max_iters);
  } else {
    std::error_code ec;
    fs::remove(log_path(o.out), ec);  // a fresh run starts a fresh log
  }
  state = {};
  {  // the effective flags, so the run can be repeated with `heed train --config DIR/config.toml`
    const std::string cfg_path = (fs::path(o.out) / "config.toml").string();
    if (!o.resume && !config_text.empty()) {
      FILE* f = std::fopen(cfg_path.c_str(), "w");
      if (f) {
        std::fputs(config_text.c_str(), f);
        std::fclose(f);
      }
    }
  }

  Profiler profiler;
  if (o.profile) trainer.set_profiler(&profiler);
  install_stop_handlers();
  const bool tty = ::isatty(STDOUT_FILENO);
  const int64_t tokens_per_iter = o.batch_size * o.block_size;
  std::printf("heed train: %lld parameters, vocab %lld, %zu train / %zu val characters, %lld tokens per iteration\n",
              (long long)trainer.model().num_params(false), (long long)trainer.corpus().vocab.size(),
              trainer.corpus().train.size(), trainer.corpus().val.size(), (long long)tokens_per_iter);
  std::fflush(stdout);

  const double start = now_s() - elapsed0;
  const int64_t first_iter = trainer.iter();
  // The iteration of the last complete checkpoint on disk (-1: none yet): an error that ends the
  // run (divergence, a failed save) says that it is kept.
  int64_t saved_iter = o.resume ? trainer.iter() : -1;
  auto stop_with = [&](const std::string& what) {
    detail::fail(what, saved_iter < 0 ? std::string("; no checkpoint was saved")
                                      : "; the checkpoint of iteration " + std::to_string(saved_iter) + " in " + o.out +
                                            " is kept");
  };
  auto save = [&](bool done) {
    try {
      trainer.save(o.out, done, now_s() - start, last_eval);
    } catch (const Error& e) {  // a full disk, or a diverged model that must not replace a good one
      stop_with(e.what());
    }
    saved_iter = trainer.iter();
  };
  double train_time = 0;
  int exit_code = 0;
  while (true) {
    const int64_t it = trainer.iter();
    if (g_stop_signal) {
      save(eval_done);
      std::printf("%sstopped by signal %d at iteration %lld; checkpoint saved in %s (continue with --resume)\n",
                  tty ? "\n" : "", int(g_stop_signal), (long long)it, o.out.c_str());
      exit_code = 128 + g_stop_signal;
      break;
    }
    if ((it % o.eval_interval == 0 || it == o.max_iters) && !eval_done) {
      double tl, vl;
      // The extra evaluation at a --max-iters off the eval interval must not move the sampler: a
      // run extended from there with --resume then draws the batches an uninterrupted run draws.
      if (!trainer.estimate_loss(tl, vl, /*keep_sampler=*/it % o.eval_interval != 0))
        continue;  // interrupted: the loop saves and stops
      if (!std::isfinite(tl) || !std::isfinite(vl))
        stop_with("training diverged: the evaluation loss is " + std::to_string(std::isfinite(tl) ? vl : tl) +
                 " at iteration " + std::to_string(it));
      last_eval = {{"iter", it}, {"train_loss", std::round(tl * 1e4) / 1e4}, {"val_loss", std::round(vl * 1e4) / 1e4},
                   {"lr", trainer.lr_at(it)}, {"elapsed_s", std::round((now_s() - start) * 100) / 100}};
      eval_done = true;
      save(true);
      append_line(log_path(o.out), last_eval.dump());
      write_loss_plot({log_path(o.out)}, (fs::path(o.out) / "loss.svg").string());
      std::printf("%seval iter %lld: train loss %.4f, val loss %.4f\n", tty ? "\r\033[K" : "", (long long)it, tl, vl);
      std::fflush(stdout);
    }
    if (it >= o.max_iters) break;
    const double t0 = now_s();
    double loss = 0;
    try {
      loss = trainer.step();
    } catch (const Error& e) {  // a non-finite loss or gradient
      stop_with(e.what());
    }
    eval_done = false;
    train_time += now_s() - t0;
    const int64_t done = trainer.iter() - first_iter;
    const double tok_s = done * tokens_per_iter / std::max(train_time, 1e-9);
    const double remaining = (o.max_iters - trainer.iter()) * (train_time / done);
    if (tty) {
      std::printf("\r\033[Kiter %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  elapsed %s  remaining %s",
                  (long long)trainer.iter(), (long long)o.max_iters, loss, trainer.lr_at(it), tok_s,
                  format_duration(now_s() - start).c_str(), format_duration(remaining).c_str());
      std::fflush(stdout);
    } else if (it % o.log_interval == 0) {
      std::printf("iter %lld: loss %.4f, lr %.2e, %.0f tok/s, elapsed %s, remaining %s\n", (long long)it, loss,
                  trainer.lr_at(it), tok_s, format_duration(now_s() - start).c_str(), format_duration(remaining).c_str());
      std::fflush(stdout);
    }
  }
  if (o.profile) {
    profiler.print(stdout, train_time, trainer.iter() - first_iter);
  }
  if (exit_code == 0) {
    std::printf("done: %lld iterations in %s; checkpoint %s\n", (long long)trainer.iter(),
                format_duration(now_s() - start).c_str(), model_path(o.out).c_str());
    if (o.sample_tokens > 0) {
      std::printf("sample:\n");
      const Vocab& vocab = trainer.corpus().vocab;
      std::vector<int32_t> ids{vocab.start_id()};
      Generator gen(o.seed);
      generate(trainer.model(), ids, o.sample_tokens, 0.8, 200, gen, [&](int32_t id) {
        std::fputs(vocab.decode(id).c_str(), stdout);
        std::fflush(stdout);
      });
      std::printf("\n");
    }
  }
  return exit_code;
}

// ------------------------------------------------------------------------------------------

int run_bench(const TrainOptions& flags) {
  TrainOptions o = flags;
  if (o.data.empty()) o.data = default_corpus_path();
  validate(o);
  require_usage(o.bench_iters >= 1, "--iters must be at least 1");
  apply_threads(o.threads);
  Trainer trainer(o, load_corpus(o.data, o.block_size));
  const int warmup = 3;
  std::vector<double> times;
  Profiler profiler;
  for (int64_t i = 0; i < warmup + o.bench_iters; ++i) {
    if (i == warmup && o.profile) trainer.set_profiler(&profiler);
    const double t0 = now_s();
    trainer.step();
    if (i >= warmup) times.push_back(now_s() - t0);
  }
  if (o.profile) {
    double total = 0;
    for (double t : times) total += t;
    profiler.print(stderr, total, o.bench_iters);
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  const double median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  json out = {{"ms_per_iter", std::round(median * 1e6) / 1e3},
              {"tokens_per_s", std::round(o.batch_size * o.block_size / median * 10) / 10},
              {"params", trainer.model().num_params(false)},
              {"ms_per_iter_min", std::round(times.front() * 1e6) / 1e3},
              {"ms_per_iter_max", std::round(times.back() * 1e6) / 1e3},
              {"iters", o.bench_iters}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace heed::cli
