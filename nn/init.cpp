#include "nn/init.h"

#include <unordered_set>

#include "core/autograd.h"

namespace heed::nn::init {

namespace {
thread_local int t_skip_init = 0;
}  // namespace

SkipInit::SkipInit() { ++t_skip_init; }
SkipInit::~SkipInit() { --t_skip_init; }
bool SkipInit::active() { return t_skip_init > 0; }

Tensor& normal_(Tensor& t, double mean, double std, Generator& gen) {
  if (SkipInit::active()) return t;
  NoGradGuard no_grad;
  t.copy_(Tensor::randn(t.shape(), gen, std, mean, t.dtype()));
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std) { return normal_(t, mean, std, default_generator()); }

Tensor& normal_(Tensor& t) { return normal_(t, 0.0, 1.0, default_generator()); }

Tensor& uniform_(Tensor& t, double lo, double hi, Generator& gen) {
  if (SkipInit::active()) return t;
  NoGradGuard no_grad;
  t.copy_(Tensor::rand(t.shape(), gen, lo, hi, t.dtype()));
  return t;
}

Tensor& uniform_(Tensor& t, double lo, double hi) { return uniform_(t, lo, hi, default_generator()); }

Tensor& zeros_(Tensor& t) {
  NoGradGuard no_grad;
  t.fill_(0.0);
  return t;
}

Tensor& ones_(Tensor& t) {
  NoGradGuard no_grad;
  t.fill_(1.0);
  return t;
}

void by_name(Module& model, uint64_t root, const ParameterRule& rule) {
  std::unordered_set<const TensorImpl*> seen;  // a tied weight belongs to the module that has it first
  for (const auto& [path, m] : model.named_modules()) {
    for (const auto& [name, registered] : m->own_parameters()) {
      if (!seen.insert(registered.impl_ptr().get()).second) continue;
      const std::string full = path.empty() ? name : path + "." + name;
      if (SkipInit::active()) continue;
      Tensor t = registered;  // a handle on the same TensorImpl: the rule writes the parameter itself
      Generator gen(derive_seed(root, full));
      rule(*m, full, t, gen);
    }
    m->reseed(derive_seed(root, path));
  }
}

void layer_default(Module& owner, const std::string& path, Tensor& t, Generator& gen) {
  owner.reset_parameter(path.substr(path.rfind('.') + 1), t, gen);  // the name within its owner
}

void by_name(Module& model, uint64_t root) { by_name(model, root, layer_default); }

}  // namespace heed::nn::init
