// Writes fuzz/corpus/: valid tiny GPT checkpoints (as heed saves them, and as PyTorch names them)
// and malformed ones, each well under 10 KB. Built in the fuzz build (-DHEED_FUZZ=ON, as
// scripts/fuzz.sh configures build-fuzz) as `make_fuzz_corpus`, and run by hand as
// `./build-fuzz/make_fuzz_corpus fuzz/corpus` (fuzz/README.md); the files are kept in the
// repository, so this only needs to run again when the format changes.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/heed.h"
#include "nn/gpt.h"
#include "nn/gpt_checkpoint.h"
#include "nn/safetensors.h"

using namespace heed;

static std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

static void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  if (bytes.size() >= 10000) std::fprintf(stderr, "warning: %s is %zu bytes\n", path.c_str(), bytes.size());
}

static std::string raw(const std::string& header, const std::string& data) {
  uint64_t n = header.size();
  std::string b(8, '\0');
  std::memcpy(b.data(), &n, 8);
  return b + header + data;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto path = [&](const std::string& name) { return dir + "/" + name; };

  // Valid: the smallest sensible GPTs (vocab 3-4, n_embd 4), with and without biases.
  for (bool bias : {false, true}) {
    nn::GPTConfig c;
    c.vocab_size = 3;
    c.block_size = 2;
    c.n_layer = 1;
    c.n_head = 2;
    c.n_embd = 4;
    c.bias = bias;
    nn::GPT model(c, 1);
    nn::save_gpt_checkpoint(path(bias ? "valid_gpt_bias.safetensors" : "valid_gpt.safetensors"), model, "\nab",
                            {{"iter", "0"}});
  }
  {
    nn::GPTConfig c;
    c.vocab_size = 4;
    c.block_size = 3;
    c.n_layer = 2;
    c.n_head = 1;
    c.n_embd = 2;
    nn::GPT model(c, 2);
    nn::save_gpt_checkpoint(path("valid_gpt_2layer.safetensors"), model, "\xc3\xa9 z\n", {});  // non-ASCII vocab
  }
  // Valid as PyTorch writes it: lm_head.weight instead of transformer.wte.weight, _orig_mod. prefix.
  {
    nn::SafetensorsFile f = nn::load_safetensors(path("valid_gpt.safetensors"));
    std::vector<std::pair<std::string, Tensor>> renamed;
    for (auto& [name, t] : f.tensors)
      renamed.emplace_back("_orig_mod." + (name == "transformer.wte.weight" ? std::string("lm_head.weight") : name), t);
    nn::save_safetensors(path("valid_gpt_torch_names.safetensors"), renamed, f.metadata);
  }
  // Valid safetensors, not a GPT: every dtype, a scalar, an empty tensor, metadata.
  write_all(path("valid_dtypes.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
                R"("h":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},)"
                R"("bf":{"dtype":"BF16","shape":[2,1],"data_offsets":[20,24]},)"
                R"("s":{"dtype":"F32","shape":[],"data_offsets":[24,28]},)"
                R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[28,28]},)"
                R"("__metadata__":{"format":"pt"}})",
                std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x3c\x00\x7c\x80\x3f\xc0\x7f"
                            "\x00\x00\xe0\x40",
                            28)));
  // Malformed: each a different check.
  const std::string good = read_all(path("valid_gpt.safetensors"));
  write_all(path("bad_truncated.safetensors"), good.substr(0, good.size() / 2));
  write_all(path("bad_short.safetensors"), good.substr(0, 5));
  std::string len_past_end = good;
  len_past_end[6] = '\x7f';
  write_all(path("bad_header_length.safetensors"), len_past_end);
  write_all(path("bad_not_json.safetensors"), raw("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_off", ""));
  write_all(path("bad_array.safetensors"), raw("[{}, {}]", ""));
  write_all(path("bad_dtype.safetensors"), raw(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')));
  write_all(path("bad_shape_overflow.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[0,9223372036854775807,9223372036854775807],"data_offsets":[0,0]}})", ""));
  write_all(path("bad_negative_shape.safetensors"), raw(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"));
  write_all(path("bad_overlap.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                std::string(8, '\0')));
  write_all(path("bad_offsets.safetensors"), raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd"));
  write_all(path("bad_metadata.safetensors"), raw(R"({"__metadata__":{"config":7}})", ""));
  write_all(path("bad_duplicate_key.safetensors"),
            raw(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", "abcd"));
  // GPT-level: a valid file whose config or vocab is wrong, or with a tensor missing.
  {
    nn::SafetensorsFile f = nn::load_safetensors(path("valid_gpt.safetensors"));
    auto meta = f.metadata;
    meta["config"] = R"({"n_layer":1,"n_head":3,"n_embd":4,"block_size":2,"vocab_size":3})";
    nn::save_safetensors(path("bad_config.safetensors"), f.tensors, meta);
    meta = f.metadata;
    meta["vocab"] = "\"\\nabc\"";
    nn::save_safetensors(path("bad_vocab.safetensors"), f.tensors, meta);
    auto tensors = f.tensors;
    tensors.pop_back();
    nn::save_safetensors(path("bad_missing_tensor.safetensors"), tensors, f.metadata);
    tensors = f.tensors;
    tensors[0].second = Tensor::full(tensors[0].second.shape(), 1e300, DType::f64);  // infinite as float32
    nn::save_safetensors(path("bad_f64_overflow.safetensors"), tensors, f.metadata);
  }
  std::printf("wrote the corpus to %s\n", dir.c_str());
  return 0;
}
