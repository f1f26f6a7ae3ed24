// libFuzzer target: `heed seq2seq --resume`'s reader of seq2seq_state.safetensors on arbitrary
// bytes. The bytes are parsed (nn::parse_safetensors), the metadata validated
// (read_seq2seq_state), the run's options taken from the record as --resume takes them with no
// flag given (resumed_options, check_ranges), and, when they describe a small model, the state is
// restored into the EncoderDecoder and the AdamW that `heed seq2seq` builds from them
// (restore_seq2seq_state: tensors against the model, moments against the optimizer, generators
// against the dropout modules). Contract (examples/heed/seq2seq_state.h): whatever the bytes, each
// step returns or throws heed::Error; any other exception, a crash, an ASan or UBSan report is a
// finding. Build and run: scripts/fuzz.sh (fuzz/README.md).
#include <cstddef>
#include <cstdint>

#include "commands.h"
#include "core/check.h"
#include "nn/safetensors.h"
#include "seq2seq.h"
#include "seq2seq_checkpoint.h"
#include "seq2seq_state.h"

using namespace heed;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string what = "seq2seq_state.safetensors";
  try {
    const nn::SafetensorsFile f = nn::parse_safetensors(data, size, what);
    const cli::Seq2SeqStateRecord r = cli::read_seq2seq_state(f, what);
    // `heed seq2seq --resume --out DIR`: every option not given is the record's.
    cli::Seq2SeqOptions given = cli::defaults(cli::seq2seq_option_table());
    given.out = "run";
    const cli::Seq2SeqOptions o = cli::resumed_options(cli::seq2seq_option_table(), given, r.options, {}, what);
    cli::check_ranges(cli::seq2seq_option_table(), o);
    // The CLI checks a model's memory before building it; here, only models of at most 10^5
    // parameters are built (the seeds' have under a thousand).
    if (cli::seq2seq_parameters(o.d_model, o.n_layer) > 1e5) return 0;
    nn::EncoderDecoder model(cli::seq2seq_model_options(o));
    model.train();
    optim::AdamW opt = cli::seq2seq_optimizer(model, o);
    Generator data_gen(0);
    cli::restore_seq2seq_state(f, r, model, opt, data_gen, what);
    // What a restored run must hold (a violation is a finding, as a crash is): the generators and
    // the step count restored as validated, the loss summed over steps done, and the moments of
    // every parameter after a step (each takes part in every step's loss), none before the first.
    if (data_gen.state() != r.data_rng || opt.step_count() != r.iter || r.interval_steps > r.iter) __builtin_trap();
    const size_t moments = r.iter > 0 ? 2 * model.named_parameters().size() : 0;  // exp_avg, exp_avg_sq
    if (opt.state_tensors().size() != moments) __builtin_trap();
  } catch (const heed::Error&) {
  }
  return 0;
}
