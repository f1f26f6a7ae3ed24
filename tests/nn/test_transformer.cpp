// Transformer layers, stacks and the EncoderDecoder: values against PyTorch's
// nn.TransformerEncoderLayer / nn.TransformerDecoderLayer, gradient checks (pre- and post-norm),
// names, causality and padding.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/heed.h"
#include "nn/transformer.h"
#include "support/helpers.h"

using namespace heed;
using heed::test::randn64;
using heed::test::require_gradcheck;
using heed::test::require_values;

namespace {

// amp * sin(0.37 n + phase) over the flat index n: deterministic values both here and in PyTorch.
Tensor formula(const Shape& shape, double phase, double amp) {
  std::vector<double> v(numel_of(shape));
  for (size_t n = 0; n < v.size(); ++n) v[n] = amp * std::sin(0.37 * static_cast<double>(n) + phase);
  return Tensor::from_vector(v, shape);
}

// Every parameter set from its dotted name (ref_tf.py's param(), below, does the same).
void set_params(nn::Module& m) {
  for (auto& [name, p] : m.named_parameters()) {
    double phase = 0;
    for (size_t i = 0; i < name.size(); ++i) phase += 0.01 * static_cast<double>((i + 1) * name[i]);
    const bool is_bias = name.ends_with("bias");
    if (name.find("norm") != std::string::npos && !is_bias) {
      p.copy_(add(formula(p.shape(), phase, 0.2), 1.0));
    } else {
      p.copy_(formula(p.shape(), phase, is_bias ? 0.1 : 0.4));
    }
  }
}

void check_module_grads(nn::Module& m, const std::vector<Tensor>& inputs, const GradcheckFn& fn,
                        int64_t max_checks = -1) {
  std::vector<Tensor> all = inputs;
  for (const auto& p : m.parameters()) all.push_back(p);
  GradcheckOptions opt = heed::test::tight_gradcheck();
  opt.max_checks = max_checks;
  require_gradcheck(fn, all, opt);
}

std::vector<std::string> param_names(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, _] : m.named_parameters()) out.push_back(n);
  return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0;
}

nn::TransformerLayerOptions small(nn::NormPlacement norm, uint64_t seed = 0) {
  return {.d_model = 4, .n_head = 2, .d_ff = 8, .norm = norm, .seed = seed};
}

}  // namespace

// PyTorch's own layers with the same weights (dropout 0, relu, batch_first):
//   /usr/bin/python3 ref_tf.py, where ref_tf.py is
//   import torch, math
//   def f(shape, phase, amp):
//       n = torch.arange(math.prod(shape), dtype=torch.float64)
//       return (amp * torch.sin(0.37 * n + phase)).reshape(shape)
//   def param(name, shape):
//       phase = 0.01 * sum((i + 1) * ord(c) for i, c in enumerate(name))
//       if 'norm' in name and name.endswith('weight'): return 1 + f(shape, phase, 0.2)
//       return f(shape, phase, 0.1 if name.endswith('bias') else 0.4)
//   C, nh, F = 4, 2, 8
//   x = f((2, 4, C), 0.5, 1.5); mem = f((2, 4, C), 0.9, 1.2); tgt = f((2, 3, C), 0.2, 1.3)
//   src_pad = torch.tensor([[0, 0, 0, 0], [0, 0, 0, 1]], dtype=torch.bool)
//   tgt_pad = torch.tensor([[0, 0, 0], [0, 0, 1]], dtype=torch.bool)
//   def load(layer, cross):
//       sd = {}
//       for m, heed in (('self_attn', 'self_attn'),) + ((('multihead_attn', 'cross_attn'),) if cross else ()):
//           if heed == 'cross_attn':
//               sd[m + '.in_proj_weight'] = torch.cat([param(heed + '.%s_proj.weight' % p, (C, C)) for p in 'qkv'])
//               sd[m + '.in_proj_bias'] = torch.cat([param(heed + '.%s_proj.bias' % p, (C,)) for p in 'qkv'])
//           else:
//               sd[m + '.in_proj_weight'] = param(heed + '.c_attn.weight', (3 * C, C))
//               sd[m + '.in_proj_bias'] = param(heed + '.c_attn.bias', (3 * C,))
//           sd[m + '.out_proj.weight'] = param(heed + '.c_proj.weight', (C, C))
//           sd[m + '.out_proj.bias'] = param(heed + '.c_proj.bias', (C,))
//       sd['linear1.weight'] = param('ff.c_fc.weight', (F, C)); sd['linear1.bias'] = param('ff.c_fc.bias', (F,))
//       sd['linear2.weight'] = param('ff.c_proj.weight', (C, F)); sd['linear2.bias'] = param('ff.c_proj.bias', (C,))
//       for i in (1, 2, 3) if cross else (1, 2):
//           sd['norm%d.weight' % i] = param('norm%d.weight' % i, (C,)); sd['norm%d.bias' % i] = param('norm%d.bias' % i, (C,))
//       layer.load_state_dict(sd)
//       return layer
//   for pre in (False, True):
//       enc = load(torch.nn.TransformerEncoderLayer(C, nh, F, 0.0, 'relu', batch_first=True, norm_first=pre).double(), False)
//       print(', '.join('%.10g' % v for v in enc(x, src_key_padding_mask=src_pad).flatten().tolist()))
//   for pre in (False, True):
//       dec = load(torch.nn.TransformerDecoderLayer(C, nh, F, 0.0, 'relu', batch_first=True, norm_first=pre).double(), True)
//       causal = torch.ones(3, 3, dtype=torch.bool).triu(1)
//       y = dec(tgt, mem, tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
//       print(', '.join('%.10g' % v for v in y.flatten().tolist()))
TEST_CASE("EncoderLayer and DecoderLayer match PyTorch's, post-norm and pre-norm", "[transformer]") {
  const std::vector<double> enc_post = {
      -1.13271349,   1.287259991,   0.9141705593,  -0.7664071324, 1.306500839,   0.5576208912,  0.1812549041,
      -1.439997361,  2.041426554,   -0.5424319812, -0.408598394,  -0.5403826609, -0.06867957556, -1.480987361,
      0.4291811477,  1.208932379,   -1.59263651,   0.7746489166,  1.171344497,   -0.1882825264, 1.111983868,
      0.7182193373,  0.2514626821,  -1.485638709,  1.904482282,   -0.1091642382, -0.1970360807, -0.9994812123,
      0.5607201836,  -1.422976711,  -0.2022111689, 1.232790173};
  const std::vector<double> enc_pre = {
      1.290965361,   0.9768095148,  1.808863662,   0.9857293988,  2.066603384,   0.7922429926,  0.9827476134,
      -0.5028107276, 0.2220077836,  -1.227414664,  -0.9416669676, -2.061720507,  -0.8114403777, -1.483099275,
      -0.3955934154, -0.9171094514, 0.9071440934,  0.4563209399,  1.545686234,   0.8731272638,  2.238163069,
      1.07396893,    1.373457661,   0.03929301444, 0.8114641717,  -0.779776544,  -0.6494739871, -1.87633139,
      -0.8814533446, -1.635725914,  -0.936751034,  -1.311869949};
  const std::vector<double> dec_post = {
      -1.482854863, 0.9861521552,  1.064774845,  -0.3742288493, 1.286898779,  0.6094607634,
      0.1253344361, -1.423879618,  1.966598324,  -0.2718146924, -0.2760981556, -0.8420153238,
      0.2967466495, -1.556757898,  0.2523835342, 1.131000666,   -1.400292724, -0.4062440057,
      1.337244914,  0.5076498905,  0.8626282137, 0.8460032081,  0.3647956371, -1.506143577};
  const std::vector<double> dec_pre = {
      0.6947134445, 0.8228118511,  1.639846017,   0.7079929723, 2.025200453,  0.73537042,
      1.251551664,  0.1641191935,  0.7406998035,  -0.9113067224, -0.5942583833, -1.412290914,
      -0.7614106348, -1.378378793, -0.357703877,  -1.137866823, 0.3065183322, 0.1496570109,
      1.371228111,  0.5792893125,  1.597486721,   1.073615836,  1.615890286,  0.7233564076};
  const Tensor x = formula({2, 4, 4}, 0.5, 1.5), mem = formula({2, 4, 4}, 0.9, 1.2);
  const Tensor tgt = formula({2, 3, 4}, 0.2, 1.3);
  const auto src_pad = nn::padding_mask_from_lengths({4, 3}, 4);
  const auto tgt_pad = nn::padding_mask_from_lengths({3, 2}, 3);
  for (auto norm : {nn::NormPlacement::post, nn::NormPlacement::pre}) {
    const bool pre = norm == nn::NormPlacement::pre;
    INFO("pre-norm " << pre);
    nn::EncoderLayer enc(small(norm));
    enc.to(DType::f64);
    set_params(enc);
    require_values(enc.forward(x, &src_pad), {2, 4, 4}, pre ? enc_pre : enc_post, 1e-9);
    nn::DecoderLayer dec(small(norm));
    dec.to(DType::f64);
    set_params(dec);
    require_values(dec.forward(tgt, mem, &tgt_pad, &src_pad), {2, 3, 4}, pre ? dec_pre : dec_post, 1e-9);
  }
}

// The same script with activation 'gelu' in both constructors (torch's exact erf GELU).
TEST_CASE("EncoderLayer and DecoderLayer with activation gelu match PyTorch's", "[transformer]") {
  const std::vector<double> enc_post = {
      -1.230835767, 1.382622979,  0.787319026,   -0.651266294, 1.178788351,   0.8529734536, -0.008237179311,
      -1.415385157, 2.032563265,  -0.3816848782, -0.6632374995, -0.4357341371, -0.386866344, -1.186284503,
      0.1866285748, 1.438244455,  -1.700351375,  0.9450308489, 0.93718,       -0.03055872706, 0.9553845513,
      1.011023893,  0.07467984285, -1.447125294, 1.887014712,  0.1189482785,  -0.4454760617, -0.9517645508,
      0.3348394054, -1.211995567, -0.3838076574, 1.402778324};
  const std::vector<double> dec_pre = {
      0.4472859759,  1.05419197,   1.43212227,   0.8852292745, 1.740907551,   1.012813591,
      0.9900820449,  0.4010167334, 0.4599935764, -0.6372371416, -0.8526784371, -1.178018627,
      -1.054000427,  -1.100690535, -0.6113587197, -0.9165869305, 0.01762765315, 0.4233334407,
      1.121765882,   0.7963336819, 1.405538718,  1.256265019,  1.448546409,   0.869891813};
  const Tensor x = formula({2, 4, 4}, 0.5, 1.5), mem = formula({2, 4, 4}, 0.9, 1.2);
  const Tensor tgt = formula({2, 3, 4}, 0.2, 1.3);
  const auto src_pad = nn::padding_mask_from_lengths({4, 3}, 4);
  const auto tgt_pad = nn::padding_mask_from_lengths({3, 2}, 3);
  nn::TransformerLayerOptions post = small(nn::NormPlacement::post), pre = small(nn::NormPlacement::pre);
  post.activation = pre.activation = nn::Activation::gelu;
  nn::EncoderLayer enc(post);
  enc.to(DType::f64);
  set_params(enc);
  CHECK(enc.ff->activation() == nn::Activation::gelu);
  require_values(enc.forward(x, &src_pad), {2, 4, 4}, enc_post, 1e-9);
  nn::DecoderLayer dec(pre);
  dec.to(DType::f64);
  set_params(dec);
  require_values(dec.forward(tgt, mem, &tgt_pad, &src_pad), {2, 3, 4}, dec_pre, 1e-9);
  // The model's option reaches every layer of both stacks.
  nn::EncoderDecoder model({.src_vocab = 5, .tgt_vocab = 5, .d_model = 4, .n_head = 2, .d_ff = 8,
                            .n_encoder_layers = 2, .n_decoder_layers = 1, .max_len = 8,
                            .activation = nn::Activation::gelu, .seed = 1});
  for (const auto& layer : *model.encoder->layers) CHECK(layer->ff->activation() == nn::Activation::gelu);
  CHECK((*model.decoder->layers)[0]->ff->activation() == nn::Activation::gelu);
}

// torch 1.13, the helpers of ref_tf.py above, f and param, with a 2-layer stack:
//   layer = torch.nn.TransformerEncoderLayer(C, nh, F, 0.0, 'gelu', batch_first=True).double()
//   enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
//   enc.load_state_dict({k: param(heed's name of k, v.shape) for k, v in enc.state_dict().items()}); enc.train()
//   kpm = torch.tensor([[0.0, -1.0, 0.5, 0.0], [0.25, 0.0, 0.0, -math.inf]], dtype=torch.float64)
//   y1 = enc(x, src_key_padding_mask=kpm)
//   src_mask = f((4, 4), 0.3, 0.8)   # with a float kpm torch 1.13 cannot add it; PyTorch 2 adds both:
//   y2 = enc(x, mask=kpm.view(2, 1, 1, 4).expand(2, nh, 4, 4).reshape(2 * nh, 4, 4) + src_mask)
//   y3 = enc(x, mask=torch.ones(4, 4, dtype=torch.bool).triu(1),
//            src_key_padding_mask=torch.tensor([[0, 0, 0, 0], [0, 0, 1, 1]], dtype=torch.bool))
TEST_CASE("Encoder and EncoderLayer take PyTorch's src_mask and src_key_padding_mask as tensors, float or bool",
          "[transformer]") {
  const std::vector<double> y1 = {
      -1.414131524, 0.1973382393,  1.122076493,   0.2823184868,  1.078301989,   0.1075534943, 0.311875939,
      -1.829435571, 1.516012348,   -0.8583358645, -0.08299762485, -0.8415069466, -0.6586508918, -1.095747713,
      0.596078142,  1.392773809,   -1.203326524,  -0.4897736672, 0.8758207448,  1.072390542,  1.075831828,
      0.1434992605, 0.281170388,   -1.834886961,  1.399403367,   -0.2605089228, 0.005271343227, -1.477158071,
      -0.3304143463, -1.192319394, 0.1198753869,  1.605620877};
  const std::vector<double> y2 = {
      -1.402347254, 0.08573111248, 1.122580597,   0.395220806,   1.075256593,   0.1166528402, 0.3082366612,
      -1.832231668, 1.518283823,   -0.8304702348, -0.08502484842, -0.8741086292, -0.679007819, -1.085077386,
      0.6273081217, 1.372397259,   -1.156607527,  -0.5552969121, 0.8001386081,  1.170486857,  1.055100808,
      0.158549763,  0.3007852696,  -1.847447205,  1.351308636,   -0.1919854964, 0.06128908594, -1.556040789,
      -0.3143107266, -1.197729698, 0.1054995437,  1.607257384};
  const std::vector<double> y3 = {
      -1.360378133, 0.5013250434,  1.148145392,   -0.1604630427, 1.142184567,   0.08086991314, 0.2276949611,
      -1.788021152, 1.558433048,   -0.8228034044, -0.2969668292, -0.7066298029, -0.6709072637, -1.08768597,
      0.6082905149, 1.385650805,   -1.315067111,  -0.1806768044, 1.204480408,   0.5056763811, 1.061229815,
      0.1618736952, 0.2873546399,  -1.844516073,  1.239624711,   -0.0006481880606, 0.1229617709, -1.703263205,
      -0.6542768884, -0.6682271769, -0.2616952274, 1.811165883};
  nn::TransformerLayerOptions o = small(nn::NormPlacement::post);
  o.activation = nn::Activation::gelu;
  nn::Encoder enc(o, 2);
  enc.to(DType::f64);
  set_params(enc);
  const Tensor x = formula({2, 4, 4}, 0.5, 1.5);
  const Tensor kpm = Tensor({{0.0, -1.0, 0.5, 0.0}, {0.25, 0.0, 0.0, -INFINITY}}).to(DType::f64);
  require_values(enc.forward(x, {.src_key_padding_mask = kpm}), {2, 4, 4}, y1, 1e-9);
  require_values(enc.forward(x, {.src_mask = formula({4, 4}, 0.3, 0.8), .src_key_padding_mask = kpm}), {2, 4, 4}, y2,
                 1e-9);
  const Tensor causal = triu(Tensor::ones({4, 4}, DType::boolean), 1);
  const Tensor bool_pad = Tensor({{false, false, false, false}, {false, false, true, true}});
  require_values(enc.forward(x, {.src_mask = causal, .src_key_padding_mask = bool_pad}), {2, 4, 4}, y3, 1e-9);
  // A bool tensor is the KeyPaddingMask it flags; one layer alone takes the same masks.
  const auto lengths = nn::padding_mask_from_lengths({4, 2}, 4);
  nn::EncoderLayer& first = *(*enc.layers)[0];
  require_values(enc.forward(x, {.src_key_padding_mask = bool_pad}), {2, 4, 4},
                 enc.forward(x, &lengths).to_vector<double>(), 1e-14);
  require_values(first.forward(x, {.src_key_padding_mask = bool_pad}), {2, 4, 4},
                 first.forward(x, &lengths).to_vector<double>(), 1e-14);
  // Pre-norm too, and differentiable w.r.t. the input, the float masks and every parameter.
  for (auto norm : {nn::NormPlacement::post, nn::NormPlacement::pre}) {
    INFO("pre-norm " << (norm == nn::NormPlacement::pre));
    nn::Encoder stack(small(norm, 31), 2);
    stack.to(DType::f64);
    check_module_grads(stack, {randn64({2, 4, 4}, 32), randn64({2, 4}, 33), randn64({4, 4}, 34)},
                       [&](const std::vector<Tensor>& in) {
                         return stack.forward(in[0], {.src_mask = in[2], .src_key_padding_mask = in[1]});
                       });
  }
}

// torch 1.13, the helpers of ref_tf.py above, f and param, tgt and mem, gelu, post- and pre-norm:
//   layer = torch.nn.TransformerDecoderLayer(C, nh, F, 0.0, 'gelu', batch_first=True, norm_first=pre).double()
//   dec = torch.nn.TransformerDecoder(layer, 2, norm=torch.nn.LayerNorm(C).double() if pre else None)
//   one = torch.nn.TransformerDecoderLayer(C, nh, F, 0.0, 'gelu', batch_first=True, norm_first=pre).double()
//   each load_state_dict({k: param(heed's name of k, v.shape)}) (multihead_attn's in_proj split into
//   cross_attn.{q,k,v}_proj); torch's decoder is causal only through its tgt_mask, heed's always:
//   causal_b = torch.ones(3, 3, dtype=torch.bool).triu(1); causal_f = zeros(3, 3).masked_fill(causal_b, -inf)
//   per_head(kpm, Tq) = kpm.view(B, 1, 1, Tk).expand(B, nh, Tq, Tk).reshape(B * nh, Tq, Tk)
//   tkpm = [[0.0, -1.0, 0.5], [0.25, 0.0, -inf]]; mkpm = [[0.0, -inf, 0.5, 0.0], [0.25, 0.0, -0.75, 0.0]]
//   tm = f((3, 3), 0.3, 0.8); mm = f((3, 4), 0.6, 0.7); mm[1, 2] = -inf
//   tb = [[0, 0, 0], [0, 0, 0], [1, 0, 0]]; mb = [[0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
//   tpb = [[0, 0, 0], [0, 0, 1]]; mpb = [[0, 0, 0, 0], [0, 0, 1, 1]]   (bool)
//   # torch 1.13 cannot add a float padding mask to a mask (it masked_fills, with a float mask):
//   # PyTorch 2 adds them, as the per-head masks below
//   y1 = dec(tgt, mem, tgt_mask=per_head(tkpm, 3) + causal_f, memory_key_padding_mask=mkpm)
//   y2 = dec(tgt, mem, tgt_mask=per_head(tkpm, 3) + causal_f + tm, memory_mask=per_head(mkpm, 3) + mm)
//   y3 = dec(tgt, mem, tgt_mask=causal_b | tb, memory_mask=mb, tgt_key_padding_mask=tpb, memory_key_padding_mask=mpb)
//   y4 = one(tgt, mem, tgt_mask=causal_f + tm, memory_mask=mm, tgt_key_padding_mask=tpb, memory_key_padding_mask=mpb)
TEST_CASE("Decoder and DecoderLayer take PyTorch's four masks as tensors, float or bool, post- and pre-norm",
          "[transformer]") {
  const std::vector<double> y1[2] = {
      {-1.205887578, -0.4116456923, 1.432293156, 0.3305253253, 1.107322248, 0.1251965584,
       0.2577308566, -1.871177858, 1.522614796, -0.3920111141, -0.1948786607, -1.312432877,
       -0.703356135, -1.176887488, 0.8282255676, 1.224917164, -0.9968454445, -0.8821222748,
       1.107698455, 0.9533130984, 0.7915699663, 0.2714428142, 0.5822846209, -1.994352249},
      {-1.139188726, -0.1740778742, 1.511943779, 0.385839657, 1.307779071, -0.5781940099,
       0.5405623981, -1.140403131, 1.526261886, -0.7177540494, -0.02078148235, -0.6492944782,
       -0.906389492, -0.5344032448, 1.6143504, 0.4034112226, -1.089870694, -0.3512473887,
       1.470860617, 0.5730782618, 1.084984537, -0.5508942579, 0.8877695999, -1.267462128}};
  const std::vector<double> y2[2] = {
      {-1.201875756, -0.403493709, 1.445989275, 0.3018211959, 1.344260353, 0.03360907291,
       -0.1240497915, -1.652897556, 1.519220695, -0.315114881, -0.250236521, -1.337060292,
       -0.7510049892, -1.142162009, 0.9126086054, 1.154413978, -0.8184004469, -1.039795842,
       0.6846077406, 1.362241927, 0.844835516, 0.2533068059, 0.5295855325, -1.983179369},
      {-1.143860033, -0.1645750569, 1.508959729, 0.3838600543, 1.564766152, -0.3911143755,
       -0.2832523536, -0.792864111, 1.556705971, -0.5975721317, -0.1605377099, -0.6760649446,
       -0.9530108584, -0.4689443429, 1.60402536, 0.3967227255, -0.9315072076, -0.6213742317,
       1.463743945, 0.6960684264, 1.22364432, -0.5501440458, 0.6794655146, -1.2171838}};
  const std::vector<double> y3[2] = {
      {-1.228476061, -0.5550442268, 1.067215119, 0.9081986705, 1.2678652, 0.02126191588,
       0.06162757606, -1.741970367, 1.487479208, -0.5601936576, 0.01635677163, -1.30194164,
       0.1496737568, -1.221960836, -0.5043696408, 1.642624412, -0.2631754045, -1.08965579,
       -0.2900309346, 1.771143155, 0.9328992557, 0.2193884842, 0.4393992336, -1.956991116},
      {-0.9843612491, -0.4431060853, 1.579121436, 0.4324210979, 1.497012105, -0.6951866696,
       0.1013633702, -0.7698237137, 1.310237954, -1.183261136, 0.3436316427, -0.2346753431,
       1.180727868, -0.9737348828, -0.7195918395, 0.8221562636, 0.365289836, -1.337018991,
       0.02420082779, 1.455539508, 1.341388435, -0.6600383338, 0.4950478272, -1.038919645}};
  const std::vector<double> y4[2] = {
      {-1.557235876, 1.14237029, 0.8662508724, -0.2644561445, 1.27984378, 0.7978249782,
       -0.1142487603, -1.358353968, 1.944656917, -0.03203250413, -0.5060453089, -0.8177362127,
       0.1168004133, -1.377117566, 0.03013245395, 1.32821235, -1.400045317, -0.5106021013,
       0.915314249, 0.9891469406, 0.8149258484, 1.028824142, 0.1932885713, -1.466048741},
      {0.434181025, 1.107640557, 1.432143473, 0.8510832792, 1.688023144, 0.8649535267,
       0.9269971367, 0.6287673239, 0.4207618517, -0.6842566834, -0.8394689831, -1.110842881,
       -1.085618059, -1.508452884, -0.7277778343, -0.4560173789, 0.03314425034, -0.04536634406,
       1.030498477, 1.245640624, 1.331569296, 1.129379844, 1.320513137, 1.174112032}};
  const Tensor tgt = formula({2, 3, 4}, 0.2, 1.3), mem = formula({2, 4, 4}, 0.9, 1.2);
  const Tensor tkpm = Tensor({{0.0, -1.0, 0.5}, {0.25, 0.0, -INFINITY}}).to(DType::f64);
  const Tensor mkpm = Tensor({{0.0, -INFINITY, 0.5, 0.0}, {0.25, 0.0, -0.75, 0.0}}).to(DType::f64);
  const Tensor tm = formula({3, 3}, 0.3, 0.8);
  std::vector<double> mm_values = formula({3, 4}, 0.6, 0.7).to_vector<double>();
  mm_values[1 * 4 + 2] = -INFINITY;
  const Tensor mm = Tensor::from_vector(mm_values, {3, 4});
  const Tensor tb = Tensor({{false, false, false}, {false, false, false}, {true, false, false}});
  const Tensor mb = Tensor({{false, false, true, false}, {false, false, false, false}, {true, false, false, false}});
  const Tensor tpb = Tensor({{false, false, false}, {false, false, true}});
  const Tensor mpb = Tensor({{false, false, false, false}, {false, false, true, true}});
  const Tensor causal = triu(Tensor::ones({3, 3}, DType::boolean), 1);
  for (int pre = 0; pre < 2; ++pre) {
    INFO("pre-norm " << pre);
    nn::TransformerLayerOptions o = small(pre ? nn::NormPlacement::pre : nn::NormPlacement::post);
    o.activation = nn::Activation::gelu;
    nn::Decoder dec(o, 2);
    dec.to(DType::f64);
    set_params(dec);
    require_values(dec.forward(tgt, mem, {.tgt_key_padding_mask = tkpm, .memory_key_padding_mask = mkpm}), {2, 3, 4},
                   y1[pre], 1e-9);
    require_values(dec.forward(tgt, mem,
                               {.tgt_mask = tm, .memory_mask = mm, .tgt_key_padding_mask = tkpm,
                                .memory_key_padding_mask = mkpm}),
                   {2, 3, 4}, y2[pre], 1e-9);
    require_values(dec.forward(tgt, mem,
                               {.tgt_mask = tb, .memory_mask = mb, .tgt_key_padding_mask = tpb,
                                .memory_key_padding_mask = mpb}),
                   {2, 3, 4}, y3[pre], 1e-9);
    // torch's causal tgt_mask, passed too, changes nothing: heed's self-attention is causal already.
    require_values(dec.forward(tgt, mem,
                               {.tgt_mask = causal | tb, .memory_mask = mb, .tgt_key_padding_mask = tpb,
                                .memory_key_padding_mask = mpb}),
                   {2, 3, 4}, y3[pre], 1e-9);
    nn::DecoderLayer one(o);
    one.to(DType::f64);
    set_params(one);
    require_values(one.forward(tgt, mem,
                               {.tgt_mask = tm, .memory_mask = mm, .tgt_key_padding_mask = tpb,
                                .memory_key_padding_mask = mpb}),
                   {2, 3, 4}, y4[pre], 1e-9);
    // Bool padding tensors are the KeyPaddingMasks they flag.
    const auto tgt_lengths = nn::padding_mask_from_lengths({3, 2}, 3);
    const auto mem_lengths = nn::padding_mask_from_lengths({4, 2}, 4);
    require_values(dec.forward(tgt, mem, {.tgt_key_padding_mask = tpb, .memory_key_padding_mask = mpb}), {2, 3, 4},
                   dec.forward(tgt, mem, &tgt_lengths, &mem_lengths).to_vector<double>(), 1e-14);
  }
}

TEST_CASE("Decoder gradcheck with four float masks, post-norm and pre-norm", "[transformer]") {
  for (auto norm : {nn::NormPlacement::post, nn::NormPlacement::pre}) {
    INFO("pre-norm " << (norm == nn::NormPlacement::pre));
    nn::Decoder stack(small(norm, 41), 2);
    stack.to(DType::f64);
    check_module_grads(stack,
                       {randn64({2, 3, 4}, 42), randn64({2, 5, 4}, 43), randn64({3, 3}, 44), randn64({3, 5}, 45),
                        randn64({2, 3}, 46), randn64({2, 5}, 47)},
                       [&](const std::vector<Tensor>& in) {
                         return stack.forward(in[0], in[1],
                                              {.tgt_mask = in[2], .memory_mask = in[3], .tgt_key_padding_mask = in[4],
                                               .memory_key_padding_mask = in[5]});
                       });
  }
}

TEST_CASE("EncoderLayer gradcheck, post-norm and pre-norm, with a padding mask", "[transformer]") {
  const auto mask = nn::padding_mask_from_lengths({4, 2}, 4);
  for (auto norm : {nn::NormPlacement::post, nn::NormPlacement::pre}) {
    INFO("pre-norm " << (norm == nn::NormPlacement::pre));
    nn::EncoderLayer layer(small(norm, 21));
    layer.to(DType::f64);
    Tensor x = randn64({2, 4, 4}, 22);
    check_module_grads(layer, {x}, [&](const std::vector<Tensor>& in) { return layer.forward(in[0], &mask); });
  }
}

TEST_CASE("DecoderLayer gradcheck, post-norm and pre-norm, Tt != Ts, both masks", "[transformer]") {
  const auto tgt_mask = nn::padding_mask_from_lengths({3, 2}, 3);
  const auto mem_mask = nn::padding_mask_from_lengths({5, 3}, 5);
  for (auto norm : {nn::NormPlacement::post, nn::NormPlacement::pre}) {
    INFO("pre-norm " << (norm == nn::NormPlacement::pre));
    nn::DecoderLayer layer(small(norm, 23));
    layer.to(DType::f64);
    Tensor x = randn64({2, 3, 4}, 24), mem = randn64({2, 5, 4}, 25);
    check_module_grads(layer, {x, mem}, [&](const std::vector<Tensor>& in) {
      return layer.forward(in[0], in[1], &tgt_mask, &mem_mask);
    });
  }
}

TEST_CASE("Encoder and Decoder stacks: names, final norm only when pre-norm, distinct layers",
          "[transformer]") {
  nn::Encoder post(small(nn::NormPlacement::post), 2);
  nn::Encoder pre(small(nn::NormPlacement::pre), 2);
  const auto names_post = param_names(post), names_pre = param_names(pre);
  REQUIRE(names_post.front() == "layers.0.self_attn.c_attn.weight");
  REQUIRE(std::find(names_post.begin(), names_post.end(), "layers.1.norm2.bias") != names_post.end());
  REQUIRE(post.norm == nullptr);
  REQUIRE(std::find(names_post.begin(), names_post.end(), "norm.weight") == names_post.end());
  REQUIRE(names_pre.size() == names_post.size() + 2);
  REQUIRE(names_pre[names_pre.size() - 2] == "norm.weight");
  REQUIRE(names_pre.back() == "norm.bias");
  // Each layer gets its own initial weights.
  REQUIRE((*post.layers)[0]->self_attn->c_attn->weight.to_vector<float>() !=
          (*post.layers)[1]->self_attn->c_attn->weight.to_vector<float>());

  nn::Decoder dec(small(nn::NormPlacement::pre), 3);
  REQUIRE(dec.layers->size() == 3);
  const auto dnames = param_names(dec);
  for (const char* n : {"layers.2.cross_attn.q_proj.weight", "layers.2.cross_attn.k_proj.weight",
                        "layers.2.cross_attn.v_proj.weight", "layers.2.cross_attn.c_proj.weight",
                        "layers.0.self_attn.c_attn.weight", "layers.0.norm3.weight", "layers.1.ff.c_fc.weight",
                        "norm.bias"})
    REQUIRE(std::find(dnames.begin(), dnames.end(), n) != dnames.end());
  REQUIRE((*dec.layers)[0]->self_attn->options().causal);
  REQUIRE_FALSE((*dec.layers)[0]->cross_attn->options().causal);
}

TEST_CASE("EncoderDecoder gradcheck over every parameter", "[transformer]") {
  for (auto norm : {nn::NormPlacement::pre, nn::NormPlacement::post}) {
    INFO("pre-norm " << (norm == nn::NormPlacement::pre));
    nn::EncoderDecoder model({.src_vocab = 7, .tgt_vocab = 6, .d_model = 4, .n_head = 2, .d_ff = 8,
                              .n_encoder_layers = 2, .n_decoder_layers = 2, .max_len = 8, .norm = norm,
                              .seed = 31});
    model.to(DType::f64);
    const std::vector<int32_t> src = {1, 2, 3, 4, 6, 5, 0, 0}, tgt = {2, 3, 1, 5, 4, 0};
    const auto src_mask = nn::padding_mask_from_lengths({4, 2}, 4);
    const auto tgt_mask = nn::padding_mask_from_lengths({3, 2}, 3);
    // Every element of every parameter (unused embedding rows must get exactly zero gradient).
    check_module_grads(model, {}, [&](const std::vector<Tensor>&) {
      return model.forward(src, 2, 4, tgt, 3, &src_mask, &tgt_mask);
    });
  }
}

TEST_CASE("EncoderDecoder: logits shape, causal decoding, padded source ignored", "[transformer]") {
  nn::EncoderDecoder model({.src_vocab = 11, .tgt_vocab = 9, .d_model = 8, .n_head = 2, .d_ff = 16,
                            .n_encoder_layers = 2, .n_decoder_layers = 2, .max_len = 16,
                            .norm = nn::NormPlacement::pre, .seed = 32});
  const std::vector<int32_t> src = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 3, 4, 5, 0, 0}, tgt = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto src_mask = nn::padding_mask_from_lengths({5, 5, 3}, 5);
  REQUIRE_THROWS_AS(model.forward(src, 3, 5, tgt, 3), Error);  // 8 target ids for B=3, T=3
  const std::vector<int32_t> tgt3 = {1, 2, 3, 4, 5, 6, 7, 8, 1};
  const Tensor y0 = model.forward(src, 3, 5, tgt3, 3, &src_mask);
  REQUIRE(y0.shape() == Shape{3, 3, 9});
  // Changing target token t leaves the logits at positions < t bitwise unchanged.
  std::vector<int32_t> tgt_b = tgt3;
  tgt_b[0 * 3 + 2] = 8;
  tgt_b[1 * 3 + 1] = 0;
  const Tensor y1 = model.forward(src, 3, 5, tgt_b, 3, &src_mask);
  REQUIRE(bitwise_equal(slice(slice(y0, 0, 0, 1), 1, 0, 2), slice(slice(y1, 0, 0, 1), 1, 0, 2)));
  REQUIRE(bitwise_equal(slice(slice(y0, 0, 1, 2), 1, 0, 1), slice(slice(y1, 0, 1, 2), 1, 0, 1)));
  REQUIRE_FALSE(bitwise_equal(slice(slice(y0, 0, 0, 1), 1, 2, 3), slice(slice(y1, 0, 0, 1), 1, 2, 3)));
  REQUIRE(bitwise_equal(slice(y0, 0, 2, 3), slice(y1, 0, 2, 3)));  // row 2 untouched
  // Changing padded source tokens changes no logit; changing a real one does.
  std::vector<int32_t> src_b = src;
  src_b[2 * 5 + 3] = 7;
  src_b[2 * 5 + 4] = 9;
  REQUIRE(bitwise_equal(y0, model.forward(src_b, 3, 5, tgt3, 3, &src_mask)));
  src_b[2 * 5 + 0] = 9;
  REQUIRE_FALSE(bitwise_equal(slice(y0, 0, 2, 3), slice(model.forward(src_b, 3, 5, tgt3, 3, &src_mask), 0, 2, 3)));
  // encode + decode is forward.
  const Tensor memory = model.encode(src, 3, 5, &src_mask);
  REQUIRE(memory.shape() == Shape{3, 5, 8});
  REQUIRE(bitwise_equal(y0, model.decode(tgt3, 3, 3, memory, nullptr, &src_mask)));
  // Names of the top level.
  const auto names = param_names(model);
  REQUIRE(names.front() == "src_embed.weight");
  REQUIRE(names[1] == "tgt_embed.weight");
  REQUIRE(names.back() == "generator.bias");
  REQUIRE(std::find(names.begin(), names.end(), "decoder.layers.1.cross_attn.k_proj.weight") != names.end());
  REQUIRE(std::find(names.begin(), names.end(), "encoder.norm.weight") != names.end());  // pre-norm
}

TEST_CASE("EncoderDecoder inputs are embedding * sqrt(d_model) + sinusoids", "[transformer]") {
  const int64_t C = 8, T = 5;
  nn::EncoderDecoder model({.src_vocab = 11, .tgt_vocab = 9, .d_model = C, .n_head = 2, .d_ff = 16,
                            .n_encoder_layers = 1, .n_decoder_layers = 1, .max_len = 16,
                            .norm = nn::NormPlacement::pre, .seed = 33});
  model.to(DType::f64);
  const std::vector<int32_t> src = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  // The paper's encoding, written out: PE[t, 2i] = sin(t / 10000^(2i/C)), PE[t, 2i+1] = cos(same).
  std::vector<double> x(2 * T * C);
  const auto table = model.src_embed->weight.to_vector<double>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const double angle = static_cast<double>(t) / std::pow(10000.0, static_cast<double>(c - c % 2) / C);
        x[(b * T + t) * C + c] = table[src[b * T + t] * C + c] * std::sqrt(static_cast<double>(C)) +
                                 (c % 2 == 0 ? std::sin(angle) : std::cos(angle));
      }
  const Tensor expected = model.encoder->forward(Tensor::from_vector(x, {2, T, C}));
  require_values(model.encode(src, 2, T), {2, T, C}, expected.to_vector<double>(), 1e-12);
}

TEST_CASE("EncoderDecoder: sequences longer than max_len are rejected", "[transformer]") {
  nn::EncoderDecoder model({.src_vocab = 5, .tgt_vocab = 5, .d_model = 4, .n_head = 2, .d_ff = 8,
                            .n_encoder_layers = 1, .n_decoder_layers = 1, .max_len = 3});
  REQUIRE_THROWS_WITH(model.encode({1, 2, 3, 4}, 1, 4), Catch::Contains("max_len"));
}

// PyTorch's layers drop each sublayer's output once (dropout1, dropout2) and the feed-forward's
// hidden activations (linear2(dropout(relu(linear1(x))))); heed's layers dropped the attention's
// and the feed-forward's outputs twice (the sublayers' own dropouts, then the layer's), 0.75 of
// them at p = 0.5 (helper-14 measured torch's TransformerEncoderLayer at 0.4974 with this setup).
TEST_CASE("EncoderLayer in training drops as PyTorch's: each sublayer output once, and the feed-forward hidden",
          "[transformer]") {
  nn::EncoderLayer layer({.d_model = 64, .n_head = 4, .d_ff = 128, .dropout = 0.5, .norm = nn::NormPlacement::pre,
                          .seed = 9});
  REQUIRE(layer.self_attn->resid_dropout->p() == 0.0);
  REQUIRE(layer.ff->dropout_on() == nn::FeedForward::DropoutOn::hidden);
  {
    NoGradGuard no_grad;  // the attention sublayer's output is then 0: only the feed-forward's is left
    layer.self_attn->c_proj->weight.zero_();
    layer.self_attn->c_proj->bias.zero_();
  }
  layer.train();
  Generator gen(10);
  const Tensor x = Tensor::randn({8, 32, 64}, gen);
  const std::vector<float> d = (layer.forward(x) - x).to_vector<float>();
  const double dropped = static_cast<double>(std::count(d.begin(), d.end(), 0.0f)) / static_cast<double>(d.size());
  REQUIRE(dropped > 0.47);  // 16384 draws at p = 0.5: sd 0.004
  REQUIRE(dropped < 0.53);
  // The feed-forward's hidden dropout: its output is no longer cut to exact zeros, but differs from eval's.
  nn::FeedForward ff(64, 128,
                     {.dropout = 0.5,
                      .activation = nn::Activation::relu,
                      .dropout_on = nn::FeedForwardDropout::hidden,
                      .gen = &gen,
                      .dropout_seed = 5});
  ff.train();
  const std::vector<float> train_out = ff.forward(x).to_vector<float>();
  REQUIRE(std::count(train_out.begin(), train_out.end(), 0.0f) < 10);
  ff.eval();
  REQUIRE(ff.forward(x).to_vector<float>() != train_out);
}
