// GPT, EncoderDecoder and the padding masks take tensors of ids and masks: the same numbers as
// the vector overloads they forward to, and errors naming a wrong dtype or shape.
#include <catch2/catch.hpp>

#include "core/heed.h"
#include "nn/nn.h"

using namespace heed;

TEST_CASE("GPT takes (B, T) id tensors", "[gpt][index]") {
  nn::GPTConfig c;
  c.vocab_size = 7, c.block_size = 4, c.n_layer = 1, c.n_head = 2, c.n_embd = 8;
  nn::GPT model(c, 3);
  const std::vector<int32_t> ids = {1, 2, 3, 4, 0, 6}, targets = {2, 3, 4, 5, 6, 1};
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>(ids.begin(), ids.end()), {2, 3});
  const Tensor tgt = Tensor::from_vector(targets, {2, 3});
  REQUIRE(model.forward(idx).to_vector<float>() == model.forward(ids, 2, 3).to_vector<float>());
  REQUIRE(model.loss(idx, tgt).item() == model.loss(ids, targets, 2, 3).item());
  REQUIRE_THROWS_WITH(model.forward(idx.to(DType::f32)), Catch::Contains("int32 or int64 tensor (B, T)"));
  REQUIRE_THROWS_WITH(model.loss(idx, tgt.reshape({6})), Catch::Contains("differ from ids"));
}

TEST_CASE("EncoderDecoder takes id tensors and bool padding masks", "[transformer][index]") {
  nn::EncoderDecoder model({.src_vocab = 11, .tgt_vocab = 9, .d_model = 8, .n_head = 2, .d_ff = 16,
                            .n_encoder_layers = 1, .n_decoder_layers = 1, .max_len = 16, .seed = 32});
  model.eval();
  const std::vector<int32_t> src = {1, 2, 3, 4, 5, 3, 4, 5, 0, 0}, tgt = {1, 2, 3, 4, 5, 6};
  const Tensor src_t = Tensor::from_vector(src, {2, 5}), tgt_t = Tensor::from_vector(tgt, {2, 3});
  const Tensor src_pad = Tensor({{false, false, false, false, false}, {false, false, false, true, true}});
  const auto lengths_mask = padding_mask_from_lengths({5, 3}, 5);
  REQUIRE(nn::key_padding_mask(src_pad).pad == lengths_mask.pad);
  REQUIRE(model.forward(src_t, tgt_t, src_pad).to_vector<float>() ==
          model.forward(src, 2, 5, tgt, 3, &lengths_mask).to_vector<float>());
  REQUIRE(model.forward(src_t, tgt_t).to_vector<float>() == model.forward(src, 2, 5, tgt, 3).to_vector<float>());
  REQUIRE_THROWS_WITH(model.forward(src_t, tgt_t.reshape({6})), Catch::Contains("must be (B, Ts) and (B, Tt)"));
}
