// heed::nn: GPT checkpoints as safetensors files with nanoGPT's tensor names, readable by PyTorch
// (safetensors.torch.load_file) and written by it (docs/checkpoint-format.md):
//
//   tensors   transformer.wte.weight, transformer.wpe.weight, transformer.h.{i}.*, transformer.ln_f.*
//             (float32, PyTorch layouts; lm_head.weight is tied to wte and left out)
//   metadata  "config": {"n_layer":4,"n_head":4,"n_embd":128,"block_size":64,"vocab_size":65,
//                        "bias":false,"dropout":0.0}
//             "vocab":  a JSON string whose code points, in order, are the vocabulary
//             "format": "pt", plus whatever the caller adds (heed train adds "iter")
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/gpt.h"

namespace heed::nn {

struct LoadedGPT {
  std::shared_ptr<GPT> model;  ///< in eval mode, float32
  std::string vocab_utf8;      ///< the vocabulary's characters, in id order, as UTF-8
  std::map<std::string, std::string> metadata;  ///< every metadata entry of the file
};

/// The tensors a checkpoint of `config` holds, in nanoGPT's state_dict order (lm_head.weight,
/// tied to transformer.wte.weight, left out).
std::vector<std::pair<std::string, Shape>> gpt_tensor_shapes(const GPTConfig& config);

/// The "config" metadata string for `config`.
std::string gpt_config_json(const GPTConfig& config);

/// Parses a "config" metadata string. Throws heed::Error naming `what` and the field when a
/// field is missing, has the wrong type, or is out of range (sizes must be positive and sane,
/// n_embd divisible by n_head, dropout in [0, 1)).
GPTConfig parse_gpt_config(const std::string& json_text, const std::string& what);

/// The index of the first NaN or infinite element of `t` (as float32, row-major), or -1: the
/// check a checkpoint's weights pass when saved and when loaded.
int64_t first_non_finite(const Tensor& t);

/// Writes `model` (float32 copies of its weights) with config, vocab and `extra` metadata to
/// `path` atomically (see save_safetensors).
void save_gpt_checkpoint(const std::string& path, const GPT& model, const std::string& vocab_utf8,
                         const std::map<std::string, std::string>& extra = {});

/// Loads a checkpoint written by save_gpt_checkpoint or by PyTorch from a nanoGPT model: accepts
/// the tied weight as either transformer.wte.weight or lm_head.weight, strips a "_orig_mod."
/// prefix (torch.compile), converts F64/F16/BF16 to float32. Throws heed::Error naming the file
/// and the tensor or field for: malformed safetensors, missing or malformed config or vocab, a
/// vocab whose length is not config.vocab_size or that repeats a character, missing or unexpected
/// tensors, wrong shapes, and non-finite (NaN, infinite) weights.
LoadedGPT load_gpt_checkpoint(const std::string& path);

/// load_gpt_checkpoint over safetensors bytes in memory (`what` names the source in errors): the
/// same checks, no file I/O (the fuzz target in fuzz/ drives it).
LoadedGPT load_gpt_checkpoint_from_bytes(const uint8_t* data, size_t size, const std::string& what);

}  // namespace heed::nn
