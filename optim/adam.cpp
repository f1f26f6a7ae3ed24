// Adam and AdamW on the Optimizer base (optim/optimizer.h).
//
// The update follows torch.optim's _single_tensor_adam(w) operation by operation (same order,
// coefficients cast to the parameter's type as PyTorch's scalar ops do), so float64 results agree
// with PyTorch to rounding. It is fused into one pass per parameter: PyTorch makes about eight
// passes over memory (mul_, add_, mul_, addcmul_, sqrt, div, add_, addcdiv_), heed one.
#include "optim/adam.h"

#include <cmath>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "core/check.h"

namespace heed::optim {

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

Adam::Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Adam(std::move(groups), lr, beta1, beta2, eps, weight_decay, false) {}

Adam::Adam(std::vector<ParamGroup> groups, double lr, double beta1, double beta2, double eps, double weight_decay,
           bool decoupled)
    : Optimizer(decoupled ? "AdamW" : "Adam", std::move(groups), lr, weight_decay, {"exp_avg", "exp_avg_sq"},
                {"step"}),
      beta1_(beta1), beta2_(beta2), eps_(eps), decoupled_(decoupled) {
  HEED_CHECK(beta1 >= 0 && beta1 < 1, name_, ": invalid beta1 ", beta1, " (need 0 <= beta1 < 1)");
  HEED_CHECK(beta2 >= 0 && beta2 < 1, name_, ": invalid beta2 ", beta2, " (need 0 <= beta2 < 1)");
  HEED_CHECK(eps >= 0 && std::isfinite(eps), name_, ": invalid eps ", eps);
}

Optimizer::BlockUpdate Adam::prepare_update(const std::string&, const Tensor& p, const Tensor& grad, ParamState& s,
                                            const ParamGroup& group) {
  const double lr = *group.lr, wd = *group.weight_decay;
  if (s.empty()) {
    s.tensors = {{"exp_avg", Tensor::zeros(p.shape(), p.dtype())}, {"exp_avg_sq", Tensor::zeros(p.shape(), p.dtype())}};
    s.scalars = {{"step", 0.0}};
  }
  const double step = ++s.scalar("step");
  const double bc1 = 1.0 - std::pow(beta1_, step), bc2 = 1.0 - std::pow(beta2_, step);
  // Adam without decay takes the decoupled path with decay 1 (p*1 is exact): PyTorch skips the L2
  // term when wd == 0, and g + 0*p would differ for an infinite p.
  const bool l2 = !decoupled_ && wd != 0;
  const double step_size = lr / bc1, bc2_sqrt = std::sqrt(bc2), decay = decoupled_ ? 1.0 - lr * wd : 1.0;
  return [=, this, m = s.tensor("exp_avg"), v = s.tensor("exp_avg_sq")](int64_t i0, int64_t i1) {
    visit_dtype(p.dtype(), [&]<class T>() {
      const Coeffs<T> c{T(beta1_), T(1.0 - beta1_), T(beta2_), T(1.0 - beta2_), T(step_size), T(bc2_sqrt), T(eps_),
                        T(decay), T(wd)};
      T* pp = p.data<T>() + i0;
      const T* gp = grad.data<T>() + i0;
      T* mp = m.data<T>() + i0;
      T* vp = v.data<T>() + i0;
      if (l2) adam_kernel<true>(pp, gp, mp, vp, i1 - i0, c);
      else adam_kernel<false>(pp, gp, mp, vp, i1 - i0, c);
    });
  };
}

}  // namespace heed::optim
