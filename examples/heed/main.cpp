// The `heed` command line: train, sample, eval and bench character-level GPTs.
// Exit codes: 0 success, 1 bad data (files, checkpoints, numerical failure), 2 usage errors
// (unknown or nonsensical flags), 128+N when stopped by signal N (after saving a checkpoint).
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <new>
#include <string>

#include "commands.h"
#include "seq2seq.h"

using namespace heed::cli;

static int fail(int code, std::string msg) {
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "heed: error: %s\n", msg.c_str());
  return code;
}

// CLI11 2.1 reads a config file only for the main app, not for a subcommand's set_config: apply
// `train --config FILE` here the way CLI11 applies one to the main app. Each key is the long name of
// a flag of `cmd` (a `[train]` section is accepted too); flags given on the command line win.
static void apply_config_file(CLI::App* cmd) {
  CLI::Option* cfg = cmd->get_config_ptr();
  if (cfg == nullptr || cfg->empty()) return;
  const std::string path = cfg->as<std::string>();
  const auto fmt = cmd->get_config_formatter();
  for (const CLI::ConfigItem& item : fmt->from_file(path)) {
    if (item.name == "++" || item.name == "--") continue;  // section markers
    const bool ours = item.parents.empty() || (item.parents.size() == 1 && item.parents[0] == cmd->get_name());
    CLI::Option* op = ours ? cmd->get_option_no_throw("--" + item.name) : nullptr;
    if (op == nullptr || op == cfg)
      throw UsageError("--config " + path + ": '" + item.fullname() + "' is not a flag of heed " + cmd->get_name());
    if (!op->empty()) continue;  // given on the command line
    if (op->get_expected_min() == 0)
      op->add_result(op->get_flag_value(item.name, fmt->to_flag(item)));
    else
      op->add_result(item.inputs);
    op->run_callback();
  }
}

// The path a run's config.toml records for --data: absolute, so the file repeats the run from any
// directory (and --resume finds the corpus again).
static void make_data_path_absolute(CLI::App* cmd) {
  CLI::Option* data = cmd->get_option("--data");
  if (data->empty()) return;
  const std::string path = data->as<std::string>();
  if (path.empty()) return;
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec || abs == path) return;
  data->clear();
  data->add_result(abs);
  data->run_callback();
}

static void add_model_flags(CLI::App* cmd, TrainOptions& o) {
  cmd->add_option("--data", o.data, "UTF-8 text file to train on (default: the bundled tiny shakespeare)");
  cmd->add_option("--n-layer", o.n_layer, "Transformer blocks")->capture_default_str();
  cmd->add_option("--n-head", o.n_head, "attention heads per block")->capture_default_str();
  cmd->add_option("--n-embd", o.n_embd, "embedding width (divisible by --n-head)")->capture_default_str();
  cmd->add_option("--block-size", o.block_size, "context length in characters")->capture_default_str();
  cmd->add_option("--dropout", o.dropout, "dropout probability in [0, 1)")->capture_default_str();
  cmd->add_flag("--bias,!--no-bias", o.bias, "biases in Linear and LayerNorm layers")->capture_default_str();
  cmd->add_option("--batch-size", o.batch_size, "sequences per batch")->capture_default_str();
  cmd->add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr", o.min_lr, "final learning rate of the cosine decay")->capture_default_str();
  cmd->add_option("--warmup-iters", o.warmup_iters, "linear warm-up steps")->capture_default_str();
  cmd->add_option("--lr-decay-iters", o.lr_decay_iters, "step at which the cosine decay reaches --min-lr")->capture_default_str();
  cmd->add_option("--weight-decay", o.weight_decay, "AdamW weight decay (2-D tensors only)")->capture_default_str();
  cmd->add_option("--beta1", o.beta1, "AdamW beta1")->capture_default_str();
  cmd->add_option("--beta2", o.beta2, "AdamW beta2")->capture_default_str();
  cmd->add_option("--grad-clip", o.grad_clip, "clip the global gradient norm to this (0: off)")->capture_default_str();
  cmd->add_option("--seed", o.seed, "random seed (initialisation, batches, dropout)")->capture_default_str();
  cmd->add_option("--threads", o.threads, "threads for matrix products and kernels (0: all cores)")->capture_default_str();
  cmd->add_flag("--profile", o.profile, "print time per op (forward/backward) and the GEMM share at the end");
}

int main(int argc, char** argv) {
  // Keep freed memory in the process: fresh pages cost a fault each on first touch, and a
  // training step frees and reallocates the same buffers every iteration.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);

  CLI::App app{"heed: train, sample and evaluate character-level GPTs"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");

  TrainOptions train_opts;
  auto* train = app.add_subcommand("train", "train a GPT on a text file (nanoGPT's shakespeare_char recipe)");
  add_model_flags(train, train_opts);
  train->add_option("--out", train_opts.out, "run directory: model.safetensors, train_state.safetensors, log.jsonl")->capture_default_str();
  train->add_flag("--resume", train_opts.resume, "continue the run in --out from its last checkpoint");
  train->add_option("--max-iters", train_opts.max_iters, "training iterations")->capture_default_str();
  train->add_option("--eval-interval", train_opts.eval_interval, "evaluate and checkpoint every N iterations")->capture_default_str();
  train->add_option("--eval-iters", train_opts.eval_iters, "batches per split in each evaluation")->capture_default_str();
  train->add_option("--log-interval", train_opts.log_interval, "print a progress line every N iterations (when not a terminal)")->capture_default_str();
  train->add_option("--sample-tokens", train_opts.sample_tokens, "characters to sample at the end")->capture_default_str();
  train->set_config("--config", "", "read flags from a TOML/INI file (each run writes DIR/config.toml)");

  TrainOptions bench_opts;
  bench_opts.bench_iters = 20;
  auto* bench = app.add_subcommand("bench", "time full training iterations; prints one JSON line");
  add_model_flags(bench, bench_opts);
  bench->add_option("--iters", bench_opts.bench_iters, "timed iterations (after 3 warm-up ones)")->capture_default_str();

  SampleOptions sample_opts;
  auto* sample = app.add_subcommand("sample", "generate text from a checkpoint");
  sample->add_option("--checkpoint", sample_opts.checkpoint, "model.safetensors written by heed train (or PyTorch)")->required();
  sample->add_option("--prompt", sample_opts.prompt, "text to continue (default: a newline)");
  sample->add_option("--tokens", sample_opts.tokens, "characters to generate")->capture_default_str();
  sample->add_option("--temperature", sample_opts.temperature, "softmax temperature (0: greedy argmax)")->capture_default_str();
  sample->add_option("--top-k", sample_opts.top_k, "sample among the k most likely characters (0: all)")->capture_default_str();
  sample->add_option("--seed", sample_opts.seed, "random seed")->capture_default_str();
  sample->add_option("--threads", sample_opts.threads, "threads (0: all cores)")->capture_default_str();

  EvalOptions eval_opts;
  auto* eval = app.add_subcommand("eval", "mean next-character cross-entropy of a checkpoint on a text file");
  eval->add_option("--checkpoint", eval_opts.checkpoint, "model.safetensors")->required();
  eval->add_option("--data", eval_opts.data, "UTF-8 text file")->required();
  eval->add_option("--batch-size", eval_opts.batch_size, "windows per forward pass")->capture_default_str();
  eval->add_option("--threads", eval_opts.threads, "threads (0: all cores)")->capture_default_str();

  std::vector<std::string> plot_logs;
  std::string plot_out;
  auto* plot = app.add_subcommand("plot", "draw train and val loss curves from log.jsonl files as SVG");
  plot->add_option("--log", plot_logs, "log.jsonl written by heed train (repeat to compare runs)")->required();
  plot->add_option("--out", plot_out, "SVG file to write")->required();

  Seq2SeqOptions s2s_opts;
  auto* s2s = app.add_subcommand("seq2seq", "train the encoder-decoder Transformer on a generated task; "
                                             "the last line is {\"task\", \"exact_match\", \"examples\"}");
  s2s->add_option("--task", s2s_opts.task, "copy, reverse or dates")->required();
  s2s->add_option("--seed", s2s_opts.seed, "random seed (data, initialisation)")->capture_default_str();
  s2s->add_option("--max-iters", s2s_opts.max_iters, "training iterations (default: copy 1000, reverse 2000, dates 1500)");
  s2s->add_option("--out", s2s_opts.out, "directory for model.safetensors (for heed attention)");
  s2s->add_option("--batch-size", s2s_opts.batch_size, "examples per batch")->capture_default_str();
  s2s->add_option("--d-model", s2s_opts.d_model, "model width")->capture_default_str();
  s2s->add_option("--n-head", s2s_opts.n_head, "attention heads")->capture_default_str();
  s2s->add_option("--n-layer", s2s_opts.n_layer, "encoder layers (and as many decoder layers)")->capture_default_str();
  s2s->add_option("--lr", s2s_opts.lr, "peak learning rate")->capture_default_str();
  s2s->add_option("--examples", s2s_opts.test_examples, "held-out test examples")->capture_default_str();
  s2s->add_option("--log-interval", s2s_opts.log_interval, "report every N iterations")->capture_default_str();
  s2s->add_option("--threads", s2s_opts.threads, "threads (0: all cores)")->capture_default_str();

  std::string attn_ckpt, attn_text, attn_out;
  auto* attn = app.add_subcommand("attention", "draw attention weights as SVG heatmaps (GPT: self-attention per "
                                               "layer and head; seq2seq: cross-attention alignment)");
  attn->add_option("--checkpoint", attn_ckpt, "model.safetensors from heed train or heed seq2seq --out")->required();
  attn->add_option("--text", attn_text, "input text (GPT: the context; seq2seq: the source)")->required();
  attn->add_option("--out", attn_out, "SVG file to write")->required();

  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == argv[1];
    }
    if (!known) return fail(2, "unknown subcommand '" + std::string(argv[1]) + "' (one of: " + names + ")");
  }
  try {
    app.parse(argc, argv);
    if (train->parsed()) {
      apply_config_file(train);
      make_data_path_absolute(train);
      train_opts.max_iters_given = train->count("--max-iters") > 0;
      for (const CLI::Option* opt : train->get_options())
        if (opt->count() > 0) train_opts.flags_given.push_back(opt->get_name());
    }
  } catch (const UsageError& e) {
    return fail(2, e.what());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(2, std::string(e.what()) + " (run 'heed --help')");
  }

  try {
    if (train->parsed()) return run_train(train_opts, train->config_to_str(true, false));
    if (bench->parsed()) return run_bench(bench_opts);
    if (sample->parsed()) return run_sample(sample_opts);
    if (eval->parsed()) return run_eval(eval_opts);
    if (plot->parsed()) return run_plot(plot_logs, plot_out);
    if (s2s->parsed()) return run_seq2seq(s2s_opts);
    if (attn->parsed()) return run_attention(attn_ckpt, attn_text, attn_out);
  } catch (const UsageError& e) {
    return fail(2, e.what());
  } catch (const heed::Error& e) {
    return fail(1, e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of memory");
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
  return 0;
}
