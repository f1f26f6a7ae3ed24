// libFuzzer target: the seq2seq checkpoint loader (`heed attention` on a `heed seq2seq --out` model)
// on arbitrary bytes: nn::parse_safetensors, then cli::load_seq2seq (the metadata typed and bounded,
// the file's parameter count against the config before the model is built, names, shapes, finite
// weights). Contract (examples/heed/seq2seq_checkpoint.h): whatever the bytes, loading returns or
// throws heed::Error; any other exception, a crash, an ASan or UBSan report is a finding. The
// count check bounds the model by the input's size, so no input can ask for a large allocation.
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "nn/safetensors.h"
#include "seq2seq_checkpoint.h"

using namespace heed;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nn::SafetensorsFile f = nn::parse_safetensors(data, size, "model.safetensors");
    cli::Seq2SeqOptions o = cli::defaults(cli::seq2seq_option_table());
    auto model = cli::load_seq2seq(f, "model.safetensors", o);
    if (!model || o.d_model < 1 || o.d_model % o.n_head != 0) __builtin_trap();  // validated
  } catch (const heed::Error&) {
  }
  return 0;
}
