// The `heed` command line: train, sample, eval and bench character-level GPTs, seq2seq, attention
// pictures and loss plots. Exit codes: 0 success, 1 bad data (files, checkpoints, numerical
// failure, a failed write), 2 usage errors (unknown or nonsensical flags), 128+N when stopped by
// signal N (after saving what training had). docs/reliability.md lists every promise.
//
// The flags of each subcommand come from its option table (options.h); this file only registers
// them with CLI11 and hands the parsed structs to the commands.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include <strings.h>

#include "commands.h"
#include "config_file.h"
#include "io.h"
#include "resources.h"
#include "seq2seq.h"
#include "stop.h"
#include "train_options.h"

using namespace heed::cli;

namespace {

int fail(int code, std::string msg) {
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "heed: error: %s\n", msg.c_str());
  return code;
}

// CLI11 reads an integer with strtoll in base 0, so "010" is 8 and "0x10" 16, and it turns
// "99999999999999999999" into INT64_MAX without a word. A number flag is written in decimal (as
// nanoGPT's argparse reads it): anything else is refused, leading zeros are dropped before CLI11
// reads the text, and the value must fit.
const CLI::Validator kInt64Text(
    [](std::string& text) -> std::string {
      const size_t sign = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
      if (text.size() == sign || text.find_first_not_of("0123456789", sign) != std::string::npos)
        return "'" + text + "' is not a decimal integer";
      const size_t first = std::min(text.find_first_not_of('0', sign), text.size() - 1);
      const std::string original = text;
      text = (text[0] == '-' ? "-" : "") + text.substr(first);
      int64_t v = 0;
      if (std::from_chars(text.data(), text.data() + text.size(), v).ec == std::errc::result_out_of_range)
        return "'" + original + "' is out of range (integers go from -9223372036854775808 to 9223372036854775807)";
      return std::string();
    },
    "", "a 64-bit integer");

// CLI11 reads a floating-point number with strtod, which also takes hexadecimal ("0x10" is 16) and
// turns "1e-400" into 0 and "1e400" into inf. A number flag is written in decimal (digits, a point,
// an exponent; or inf and nan, which the flags' own checks then name), and its value must be a
// double's: not past the largest, nor a nonzero number that would read as 0.
const CLI::Validator kDoubleText(
    [](std::string& text) -> std::string {
      const size_t sign = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
      for (const char* word : {"inf", "infinity", "nan"})
        if (::strcasecmp(text.c_str() + sign, word) == 0) return std::string();
      size_t i = sign, mantissa_digits = 0;
      bool nonzero = false;
      auto digits = [&] {
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
          nonzero |= text[i] != '0';
          ++i, ++mantissa_digits;
        }
      };
      digits();
      if (i < text.size() && text[i] == '.') ++i, digits();
      bool decimal = mantissa_digits > 0;
      if (decimal && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        ++i;
        if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
        const size_t exponent_start = i;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
        decimal = i > exponent_start;
      }
      if (!decimal || i != text.size()) return "'" + text + "' is not a decimal number";
      const double v = std::strtod(text.c_str(), nullptr);
      if (std::isinf(v)) return "'" + text + "' is out of range (a double's largest is 1.8e308)";
      if (v == 0 && nonzero) return "'" + text + "' is too small for a double: it would read as 0";
      return std::string();
    },
    "", "a decimal number");

// Registers every option of `table` on `cmd`, setting the members of `o` (which holds the
// defaults, so --help shows them). Each option answers to --flag and to nanoGPT's --name; a
// boolean also to --no-flag.
template <class T>
void add_options(CLI::App* cmd, const OptionTable<T>& table, T& o) {
  for (const auto& opt : table) {
    std::string names;
    for (const auto& s : opt.spellings()) names += (names.empty() ? "--" : ",--") + s;
    std::visit(
        [&](auto member) {
          using M = std::remove_reference_t<decltype(o.*member)>;
          CLI::Option* added;
          if constexpr (std::is_same_v<M, bool>)
            added = cmd->add_flag(names + ",!--no-" + opt.flag, o.*member, opt.help);
          else
            added = cmd->add_option(names, o.*member, opt.help);
          if constexpr (std::is_same_v<M, int64_t>) added->transform(kInt64Text);  // (transform: may rewrite)
          if constexpr (std::is_same_v<M, double>) added->check(kDoubleText);
          added->capture_default_str();
          if (opt.required) added->required();
        },
        opt.member);
  }
}

// The names of the table's options given on the command line.
template <class T>
std::set<std::string> given_options(CLI::App* cmd, const OptionTable<T>& table) {
  std::set<std::string> given;
  for (const auto& opt : table)
    if (cmd->count("--" + opt.flag) > 0) given.insert(opt.name);
  return given;
}

// --help: CLI11 prints to std::cout; the help is output like any other, complete or an error.
int print_help(const CLI::App& app, const CLI::Error& e) {
  const int code = app.exit(e);
  std::cout.flush();
  if (!std::cout) return fail(1, std::string("writing to standard output failed (") + std::strerror(errno) + ")");
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory in the process: fresh pages cost a fault each on first touch, and a
  // training step frees and reallocates the same buffers every iteration.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  install_stop_handlers();

  CLI::App app{"heed: train, sample and evaluate character-level GPTs", "heed"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  app.set_version_flag("--version", "heed " HEED_VERSION);
  std::string memory_limit;
  app.add_option("--memory-limit", memory_limit,
                 "the memory heed may plan to use, e.g. 4G (default: HEED_MEMORY_LIMIT, else the system's)");
  app.fallthrough();  // `heed train --memory-limit 4G` as well as `heed --memory-limit 4G train`

  TrainRequest train_req;
  train_req.options = defaults(train_option_table());
  auto* train = app.add_subcommand("train", "train a GPT on a text file (nanoGPT's shakespeare_char recipe)");
  add_options(train, train_option_table(), train_req.options);
  train->add_flag("--resume", train_req.resume, "continue the run in --out from its last checkpoint");
  train->add_flag("--overwrite", train_req.overwrite, "start over in an --out that holds a run (its files are removed)");
  train->add_option("--config", train_req.config,
                    "read options from a TOML file such as a run's config.toml (flags given here win)");

  TrainOptions bench_opts = defaults(bench_option_table());
  auto* bench = app.add_subcommand("bench", "time full training iterations; prints one JSON line");
  add_options(bench, bench_option_table(), bench_opts);

  SampleOptions sample_opts = defaults(sample_option_table());
  auto* sample = app.add_subcommand("sample", "generate text from a checkpoint");
  add_options(sample, sample_option_table(), sample_opts);

  EvalOptions eval_opts = defaults(eval_option_table());
  auto* eval = app.add_subcommand("eval", "mean next-character cross-entropy of a checkpoint on a text file");
  add_options(eval, eval_option_table(), eval_opts);

  std::vector<std::string> plot_logs;
  std::string plot_out;
  auto* plot = app.add_subcommand("plot", "draw train and val loss curves from log.jsonl files as SVG");
  plot->add_option("--log", plot_logs, "log.jsonl written by heed train (repeat to compare runs)")->required();
  plot->add_option("--out", plot_out, "SVG file to write")->required();

  Seq2SeqRequest s2s_req;
  s2s_req.options = defaults(seq2seq_option_table());
  auto* s2s = app.add_subcommand("seq2seq", "train the encoder-decoder Transformer on a generated task; "
                                             "the last line is {\"task\", \"exact_match\", \"examples\"}");
  add_options(s2s, seq2seq_option_table(), s2s_req.options);
  s2s->add_flag("--resume", s2s_req.resume, "continue the run in --out from its last checkpoint");
  s2s->add_flag("--overwrite", s2s_req.overwrite, "start over in an --out that holds a seq2seq run (its files are removed)");

  std::string attn_ckpt, attn_text, attn_out;
  auto* attn = app.add_subcommand("attention", "draw attention weights as SVG heatmaps (GPT: self-attention per "
                                               "layer and head; seq2seq: cross-attention alignment)");
  attn->add_option("--checkpoint", attn_ckpt, "model.safetensors from heed train or heed seq2seq --out")->required();
  attn->add_option("--text", attn_text, "input text (GPT: the context; seq2seq: the source)")->required();
  attn->add_option("--out", attn_out, "SVG file to write")->required();

  std::string inspect_ckpt;
  bool inspect_json = false;
  auto* inspect = app.add_subcommand("inspect", "print a checkpoint's config, vocabulary, parameter count, "
                                                "iteration and last losses");
  inspect->add_option("checkpoint", inspect_ckpt, "model.safetensors (heed train's, or a PyTorch one)")->required();
  inspect->add_flag("--json", inspect_json, "one JSON object, for scripts");

  if (argc == 1) {  // plain `heed`: what it can do, not a complaint about a missing subcommand
    std::cout << app.help();
    std::cout.flush();
    if (!std::cout) return fail(1, std::string("writing to standard output failed (") + std::strerror(errno) + ")");
    return 0;
  }
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
    set_memory_limit_flag(memory_limit);
    if (s2s->parsed()) s2s_req.from_command_line = given_options(s2s, seq2seq_option_table());
    if (train->parsed()) {
      train_req.from_command_line = given_options(train, train_option_table());
      if (!train_req.config.empty())
        apply_config(train_option_table(), read_config_file(train_req.config), train_req.config, "heed train",
                     train_req.from_command_line, train_req.options, train_req.from_config);
    }
  } catch (const UsageError& e) {
    return fail(2, e.what());
  } catch (const CLI::CallForHelp& e) {
    return print_help(app, e);
  } catch (const CLI::CallForAllHelp& e) {
    return print_help(app, e);
  } catch (const CLI::CallForVersion& e) {
    return print_help(app, e);
  } catch (const CLI::ParseError& e) {
    return fail(2, std::string(e.what()) + " (run 'heed --help')");
  }

  try {
    int code = 0;
    if (train->parsed()) code = run_train(train_req);
    else if (bench->parsed()) code = run_bench(bench_opts);
    else if (sample->parsed()) code = run_sample(sample_opts);
    else if (eval->parsed()) code = run_eval(eval_opts);
    else if (plot->parsed()) code = run_plot(plot_logs, plot_out);
    else if (s2s->parsed()) code = run_seq2seq(s2s_req);
    else if (attn->parsed()) code = run_attention(attn_ckpt, attn_text, attn_out);
    else if (inspect->parsed()) code = run_inspect(inspect_ckpt, inspect_json);
    finish_stdout();  // output is complete or the command fails
    return code;
  } catch (const Stopped& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "heed: stopped by signal %d\n", e.signal);
    return 128 + e.signal;
  } catch (const UsageError& e) {
    return fail(2, e.what());
  } catch (const heed::Error& e) {
    return fail(1, e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of memory");
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
}
