// Adam and AdamW, plus the Optimizer base (optim/optimizer.h) they share.
//
// The update follows torch.optim's _single_tensor_adam(w) operation by operation (same order,
// coefficients cast to the parameter's type as PyTorch's scalar ops do), so float64 results agree
// with PyTorch to rounding. It is fused into one pass per parameter: PyTorch makes about eight
// passes over memory (mul_, add_, mul_, addcmul_, sqrt, div, add_, addcdiv_), heed one.
#include "optim/adam.h"

#include <cmath>
#include <map>
#include <set>
#include <type_traits>
#include <unordered_set>
#include <xsimd/xsimd.hpp>

#include "core/check.h"
#include "core/parallel.h"

namespace heed::optim {

// ---------------------------------------------------------------------------------------------
// Optimizer (the base; its declarations are in optimizer.h)

std::vector<ParamGroup> param_groups_nanogpt(const NamedTensors& named_params, double weight_decay) {
  std::vector<ParamGroup> groups(2);
  groups[0].weight_decay = weight_decay;
  groups[1].weight_decay = 0.0;
  for (const auto& [name, t] : named_params) {
    HEED_CHECK(t.defined(), "param_groups_nanogpt: parameter '", name, "' is an undefined tensor");
    groups[t.dim() >= 2 ? 0 : 1].params.emplace_back(name, t);
  }
  return groups;
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double lr) : groups_(std::move(groups)) {
  set_lr(lr);
  std::set<std::string> names;
  std::unordered_set<const TensorImpl*> impls;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const double wd = groups_[g].weight_decay;
    HEED_CHECK(std::isfinite(wd) && wd >= 0, "optimizer: invalid weight_decay ", wd, " in group ", g);
    for (const auto& [name, t] : groups_[g].params) {
      HEED_CHECK(t.defined(), "optimizer: parameter '", name, "' is an undefined tensor");
      HEED_CHECK(names.insert(name).second, "optimizer: parameter name '", name, "' is listed twice");
      // A tensor stepped twice per step() (e.g. a tied weight under both names) would be
      // updated twice with one gradient.
      HEED_CHECK(impls.insert(t.impl_ptr().get()).second, "optimizer: parameter '", name,
                 "' is a tensor already listed under another name");
    }
    state_.emplace_back(groups_[g].params.size());
  }
}

void Optimizer::set_lr(double lr) {
  HEED_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: invalid learning rate ", lr);
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (auto& group : groups_)
    for (auto& [name, t] : group.params) t.zero_grad();
}

NamedTensors Optimizer::state_tensors() const {
  NamedTensors out;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const ParamState& s = state_[g][i];
      if (!s.exp_avg.defined()) continue;
      const std::string& name = groups_[g].params[i].first;
      out.emplace_back(name + ".exp_avg", s.exp_avg);
      out.emplace_back(name + ".exp_avg_sq", s.exp_avg_sq);
    }
  return out;
}

void Optimizer::load_state(const NamedTensors& state, int64_t step_count) {
  HEED_CHECK(step_count >= 0, "load_state: negative step count ", step_count);
  std::map<std::string, const Tensor*> entries;
  for (const auto& [name, t] : state) {
    HEED_CHECK(t.defined(), "load_state: entry '", name, "' is an undefined tensor");
    HEED_CHECK(entries.emplace(name, &t).second, "load_state: entry '", name, "' appears twice");
  }
  // Build everything first and commit at the end, so a bad entry leaves the optimizer as it was.
  std::vector<std::vector<ParamState>> fresh;
  size_t used = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    fresh.emplace_back(groups_[g].params.size());
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      // Plain references, not a structured binding: the lambda below captures them, which
      // clang 14 (the fuzz build's compiler) does not allow for bindings.
      const std::string& name = groups_[g].params[i].first;
      const Tensor& p = groups_[g].params[i].second;
      const std::string key_m = name + ".exp_avg", key_v = name + ".exp_avg_sq";
      auto m = entries.find(key_m), v = entries.find(key_v);
      if (m == entries.end() && v == entries.end()) continue;  // this parameter has no state yet
      HEED_CHECK(m != entries.end(), "load_state: '", key_m, "' is missing (but '", key_v, "' is present)");
      HEED_CHECK(v != entries.end(), "load_state: '", key_v, "' is missing (but '", key_m, "' is present)");
      auto copy_of = [&](const std::string& key, const Tensor& src) {
        HEED_CHECK(src.shape() == p.shape(), "load_state: '", key, "' has shape ", to_string(src.shape()),
                   " but parameter '", name, "' has shape ", to_string(p.shape()));
        Tensor t = Tensor::empty(p.shape(), p.dtype());
        t.copy_(src);  // converts the dtype if the file holds another
        return t;
      };
      ParamState& s = fresh[g][i];
      s.exp_avg = copy_of(key_m, *m->second);
      s.exp_avg_sq = copy_of(key_v, *v->second);
      s.step = step_count;
      used += 2;
    }
  }
  if (used != entries.size()) {
    for (const auto& [name, t] : entries) {
      bool known = false;
      for (const auto& group : groups_)
        for (const auto& [pname, p] : group.params)
          known |= name == pname + ".exp_avg" || name == pname + ".exp_avg_sq";
      HEED_CHECK(known, "load_state: entry '", name, "' matches no parameter (expected '<name>.exp_avg' or "
                 "'<name>.exp_avg_sq' for a parameter of this optimizer)");
    }
  }
  state_ = std::move(fresh);
  step_count_ = step_count;
}

// ---------------------------------------------------------------------------------------------
// Adam / AdamW

namespace {

// The coefficients of one parameter's update, as T (scalar tail) or as a SIMD batch (body).
template <class V>
struct Coeffs {
  V beta1, one_minus_beta1, beta2, one_minus_beta2;
  V step_size;     // lr / (1 - beta1^t)
  V bc2_sqrt;      // sqrt(1 - beta2^t)
  V eps;
  V decay;         // AdamW: 1 - lr*wd (1 when there is no decay)
  V l2;            // Adam: wd, added to the gradient as wd*p
};

template <class V>
V vsqrt(const V& x) {
  if constexpr (std::is_floating_point_v<V>) return std::sqrt(x);
  else return xsimd::sqrt(x);
}

// One element (or one batch of elements). The expression order is PyTorch's:
// mul_(b1).add_(g, alpha=1-b1); mul_(b2).addcmul_(g, g, value=1-b2); sqrt(v)/bc2_sqrt + eps;
// addcdiv_(m, denom, value=-step_size).
template <bool kL2, class V>
inline void adam_element(V& p, V g, V& m, V& v, const Coeffs<V>& c) {
  if constexpr (kL2) g = g + c.l2 * p;
  else p = p * c.decay;
  m = m * c.beta1 + c.one_minus_beta1 * g;
  v = v * c.beta2 + c.one_minus_beta2 * g * g;
  p = p - c.step_size * m / (vsqrt(v) / c.bc2_sqrt + c.eps);
}

template <bool kL2, class T>
void adam_kernel(T* p, const T* g, T* m, T* v, int64_t n, const Coeffs<T>& c) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const Coeffs<B> cb{B(c.beta1), B(c.one_minus_beta1), B(c.beta2), B(c.one_minus_beta2), B(c.step_size),
                     B(c.bc2_sqrt), B(c.eps), B(c.decay), B(c.l2)};
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B pb = B::load_unaligned(p + i), mb = B::load_unaligned(m + i), vb = B::load_unaligned(v + i);
    adam_element<kL2>(pb, B::load_unaligned(g + i), mb, vb, cb);
    pb.store_unaligned(p + i);
    mb.store_unaligned(m + i);
    vb.store_unaligned(v + i);
  }
  for (; i < n; ++i) adam_element<kL2>(p[i], g[i], m[i], v[i], c);
}

}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps)
    : Adam(std::move(groups), lr, beta1, beta2, eps, false) {}

Adam::Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps, bool decoupled)
    : Optimizer(std::move(groups), lr), beta1_(beta1), beta2_(beta2), eps_(eps), decoupled_(decoupled) {
  const char* name = decoupled ? "AdamW" : "Adam";
  HEED_CHECK(beta1 >= 0 && beta1 < 1, name, ": invalid beta1 ", beta1, " (need 0 <= beta1 < 1)");
  HEED_CHECK(beta2 >= 0 && beta2 < 1, name, ": invalid beta2 ", beta2, " (need 0 <= beta2 < 1)");
  HEED_CHECK(eps >= 0 && std::isfinite(eps), name, ": invalid eps ", eps);
}

void Adam::step() {
  const char* opname = decoupled_ ? "AdamW" : "Adam";
  // Check everything before touching anything, so a bad gradient leaves the model as it was.
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const auto& [name, p] = groups_[g].params[i];
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      HEED_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype(), opname, ": gradient of '", name,
                 "' is ", dtype_name(grad.dtype()), " ", to_string(grad.shape()), ", the parameter ",
                 dtype_name(p.dtype()), " ", to_string(p.shape()));
      HEED_CHECK(p.is_contiguous() && grad.is_contiguous(), opname, ": parameter '", name,
                 "' or its gradient is not contiguous");
      const ParamState& s = state_[g][i];
      HEED_CHECK(!s.exp_avg.defined() || s.exp_avg.dtype() == p.dtype(), opname, ": parameter '", name,
                 "' is ", dtype_name(p.dtype()), " but its state is ", dtype_name(s.exp_avg.dtype()),
                 " (converted after the optimizer was made?)");
    }

  ++step_count_;
  // Every parameter's update in one job over fixed blocks: a model's parameters are mostly too
  // small to split one at a time. Each element takes the same (vector or tail) path on any
  // thread count, so the result does not depend on it.
  struct Update {
    Tensor p, grad;
    ParamState* state;
    double step_size, bc2_sqrt, decay, wd;
    bool l2;
  };
  std::vector<Update> updates;
  std::vector<int64_t> lengths;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const double wd = groups_[g].weight_decay;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const Tensor& p = groups_[g].params[i].second;
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& s = state_[g][i];
      if (!s.exp_avg.defined()) {
        s.exp_avg = Tensor::zeros(p.shape(), p.dtype());
        s.exp_avg_sq = Tensor::zeros(p.shape(), p.dtype());
      }
      ++s.step;
      const double bc1 = 1.0 - std::pow(beta1_, static_cast<double>(s.step));
      const double bc2 = 1.0 - std::pow(beta2_, static_cast<double>(s.step));
      // Adam without decay takes the decoupled path with decay 1 (p*1 is exact): PyTorch skips
      // the L2 term when wd == 0, and g + 0*p would differ for an infinite p.
      updates.push_back({p, std::move(grad), &s, lr_ / bc1, std::sqrt(bc2), decoupled_ ? 1.0 - lr_ * wd : 1.0, wd,
                         !decoupled_ && wd != 0});
      lengths.push_back(p.numel());
    }
  }
  parallel_for_blocks(lengths, 8192, int64_t(1) << 15, [&](size_t u, int64_t i0, int64_t i1) {
    const Update& up = updates[u];
    visit_dtype(up.p.dtype(), [&]<class T>() {
      const Coeffs<T> c{T(beta1_), T(1.0 - beta1_), T(beta2_), T(1.0 - beta2_), T(up.step_size),
                        T(up.bc2_sqrt), T(eps_), T(up.decay), T(up.wd)};
      T* pp = up.p.data<T>() + i0;
      const T* gp = up.grad.data<T>() + i0;
      T* mp = up.state->exp_avg.data<T>() + i0;
      T* vp = up.state->exp_avg_sq.data<T>() + i0;
      if (up.l2) adam_kernel<true>(pp, gp, mp, vp, i1 - i0, c);
      else adam_kernel<false>(pp, gp, mp, vp, i1 - i0, c);
    });
  });
}

}  // namespace heed::optim
