// libFuzzer target: `heed train --resume`'s reader of train_state.safetensors on arbitrary bytes.
// The bytes are parsed (nn::parse_safetensors), the metadata validated (read_train_state), and,
// when the recorded options describe a small model, the state is restored into a model and an
// AdamW built from them (restore_train_state: tensors against the model, moments against the
// optimizer, generators against the dropout modules). Contract (examples/heed/train_state.h):
// whatever the bytes, each step returns or throws heed::Error; any other exception, a crash, an
// ASan or UBSan report is a finding. Build and run: scripts/fuzz.sh (fuzz/README.md).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "nn/gpt.h"
#include "nn/safetensors.h"
#include "optim/adam.h"
#include "resources.h"
#include "train_state.h"

using namespace heed;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nn::SafetensorsFile f = nn::parse_safetensors(data, size, "train_state.safetensors");
    const cli::TrainStateRecord r = cli::read_train_state(f, "train_state.safetensors");
    // The CLI checks a model's memory before building it; here, only models of at most 10^5
    // parameters are built (the seeds' have a few hundred).
    int64_t vocab = 0;  // the characters of the recorded vocabulary: the model's embedding rows
    for (unsigned char b : r.vocab_utf8) vocab += (b & 0xC0) != 0x80;
    const nn::GPTConfig c = cli::gpt_config(r.options, std::max<int64_t>(vocab, 1));
    if (cli::gpt_parameters(c) > 1e5) return 0;
    nn::GPT model(c, static_cast<uint64_t>(r.options.seed));
    optim::AdamW opt(optim::param_groups_nanogpt(model.named_parameters(), r.options.weight_decay), r.options.lr,
                     r.options.beta1, r.options.beta2);
    Generator data_gen(0);
    cli::restore_train_state(f, r, model, opt, data_gen, "train_state.safetensors");
    if (data_gen.state() == Generator::State{}) __builtin_trap();  // validated: never all zero
    // Every parameter has its moments (exp_avg, exp_avg_sq) after a step, none before the first.
    const size_t moments = r.iter > 0 ? 2 * model.named_parameters().size() : 0;
    if (opt.state_tensors().size() != moments) __builtin_trap();
  } catch (const heed::Error&) {
  }
  return 0;
}
