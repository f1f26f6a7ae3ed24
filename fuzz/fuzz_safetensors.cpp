// libFuzzer target: the safetensors parser and the GPT checkpoint loader on arbitrary bytes.
// Contract (nn/safetensors.h, nn/gpt_checkpoint.h): whatever the bytes, loading either succeeds or
// throws heed::Error; any other exception, a crash, an out-of-bounds read (ASan) or undefined
// behaviour (UBSan) is a finding. Build and run: scripts/fuzz.sh (see fuzz/README.md).
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    heed::nn::SafetensorsFile f = heed::nn::parse_safetensors(data, size, "fuzz.safetensors");
    // Touch every element: a tensor must own as many bytes as its shape says.
    volatile double sink = 0;
    for (auto& [name, t] : f.tensors)
      if (t.numel() > 0) sink = sink + t.to_vector<double>().back();
  } catch (const heed::Error&) {
  }
  try {
    heed::nn::LoadedGPT g = heed::nn::load_gpt_checkpoint_from_bytes(data, size, "fuzz.safetensors");
    if (g.model->config().vocab_size < 1 || g.vocab_utf8.empty()) __builtin_trap();  // validated
  } catch (const heed::Error&) {
  }
  return 0;
}
