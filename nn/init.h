// heed::nn: in-place parameter initialisers (torch.nn.init), run outside autograd (each under its
// own NoGradGuard, as torch's run under torch.no_grad(), so they may fill a parameter that requires grad). Each keeps the
// tensor's shape, dtype and storage, so every handle and tied alias sees the new values. And the
// initialisation of a whole model from one seed, by name:
//
//   nn::init::by_name(model, 1337);   // each parameter from derive_seed(1337, its dotted name)
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/random.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace heed::nn::init {

/// While a SkipInit lives in this thread, normal_, uniform_ and by_name's rules leave parameters
/// as allocated (by_name still reseeds every module's dropout). For a model whose every parameter
/// is about to be overwritten by a checkpoint (nn::load_gpt), as torch.nn.utils.skip_init: drawing
/// a 10 M-parameter model's initial values took longer than reading its file. The generators a
/// skipped initialiser would have drawn from are not advanced.
class SkipInit {
 public:
  SkipInit();
  ~SkipInit();
  SkipInit(const SkipInit&) = delete;
  SkipInit& operator=(const SkipInit&) = delete;
  /// Whether a SkipInit lives in this thread.
  static bool active();
};

/// Fills `t` with normal(mean, std) samples from `gen`; returns t. The arguments come in
/// torch.nn.init.normal_'s order, mean before std: a port of `normal_(w, mean=0.0, std=0.02)` is
/// `normal_(w, 0.0, 0.02)`. There is no two-argument form: torch reads `normal_(w, 0.02)` as a
/// mean of 0.02, where heed before 2026-11-30 read it as a std, so neither compiles now.
Tensor& normal_(Tensor& t, double mean, double std, Generator& gen);
/// The same from the default generator.
Tensor& normal_(Tensor& t, double mean, double std);
/// Fills `t` with standard normal samples (mean 0, std 1) from the default generator; returns t.
Tensor& normal_(Tensor& t);
/// Fills `t` with uniform [lo, hi) samples from `gen`; returns t.
Tensor& uniform_(Tensor& t, double lo, double hi, Generator& gen);
/// Fills `t` with uniform [lo, hi) samples from the default generator; returns t.
Tensor& uniform_(Tensor& t, double lo, double hi);
/// Fills `t` with zeros; returns t.
Tensor& zeros_(Tensor& t);
/// Fills `t` with ones; returns t.
Tensor& ones_(Tensor& t);

/// How by_name draws one parameter: `owner` is the module that registered it, `path` its dotted
/// name in the model ("transformer.h.0.attn.c_proj.weight"), `gen` its own generator.
using ParameterRule = std::function<void(Module& owner, const std::string& path, Tensor& t, Generator& gen)>;

/// Initialises `model` from the root seed `root`, by name: every parameter is drawn by `rule` from
/// Generator(derive_seed(root, its dotted name)) (a tied weight once, under its first name), then
/// every module is reseeded (Module::reseed: Dropout's masks) with derive_seed(root, its dotted
/// path). A parameter's values thus depend only on the root seed and its own name: adding,
/// removing or reordering other children leaves them as they were.
void by_name(Module& model, uint64_t root, const ParameterRule& rule);
/// by_name with each layer's default init: layer_default for every parameter.
void by_name(Module& model, uint64_t root);
/// The default rule: the owner's own init (Module::reset_parameter), for a custom rule to fall
/// back on.
void layer_default(Module& owner, const std::string& path, Tensor& t, Generator& gen);

}  // namespace heed::nn::init

namespace heed::nn {
// Also reachable as nn::normal_(...) etc.
using init::normal_;
using init::ones_;
using init::uniform_;
using init::zeros_;
}  // namespace heed::nn
