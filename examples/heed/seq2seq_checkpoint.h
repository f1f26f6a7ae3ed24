// `heed seq2seq --out DIR` writes DIR/model.safetensors: the encoder-decoder's parameters under
// their dotted names, float32, and the metadata "seq2seq" = {"task", "d_model", "n_head",
// "n_layer", "seed"} that rebuilds the model (docs/checkpoint-format.md).
//
// Loading trusts nothing, as the GPT loader (nn/gpt_checkpoint.h): the metadata's fields are typed
// and bounded, the file's tensors must hold exactly the parameters that config implies (counted
// before the model is built, so a small file claiming a huge model costs nothing), every one
// present with its shape and finite, and none left over. fuzz/fuzz_seq2seq_checkpoint.cpp drives it.
#pragma once

#include <memory>
#include <string>

#include "nn/safetensors.h"
#include "nn/transformer.h"
#include "seq2seq.h"

namespace heed::cli {

/// Writes `model` with `o`'s task and sizes as metadata, atomically; refuses non-finite weights
/// (heed::Error naming the tensor).
void save_seq2seq(const std::string& path, const nn::EncoderDecoder& model, const Seq2SeqOptions& o);

/// Builds the model a seq2seq checkpoint describes and loads its weights; sets o.task, d_model,
/// n_head, n_layer and seed. Throws heed::Error naming `what` and the field or tensor.
std::shared_ptr<nn::EncoderDecoder> load_seq2seq(const nn::SafetensorsFile& file, const std::string& what,
                                                 Seq2SeqOptions& o);

/// Parameters of heed seq2seq's encoder-decoder (pre-norm, biases, d_ff = 4 d_model, n_layer
/// encoder and as many decoder layers, the 98-token vocabulary): what its checkpoint holds.
double seq2seq_parameters(int64_t d_model, int64_t n_layer);

}  // namespace heed::cli
