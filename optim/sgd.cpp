// SGD on the Optimizer base: the whole optimizer is its constructor and prepare_update.
// The update follows torch.optim's _single_tensor_sgd operation by operation (same order,
// coefficients cast to the parameter's type), fused into one pass over each parameter.
#include "optim/sgd.h"

#include <cmath>

#include "core/check.h"

namespace heed::optim {

namespace {

struct SgdStep {
  double lr, wd, momentum, one_minus_dampening;
  bool first;  // the buffer starts as this step's g
  bool nesterov;
};

// n elements of p, its gradient g and its momentum buffer b (null without momentum).
template <class T>
void sgd_kernel(T* p, const T* g, T* b, int64_t n, const SgdStep& s) {
  const T lr = T(s.lr), wd = T(s.wd), mom = T(s.momentum), keep = T(s.one_minus_dampening);
  for (int64_t i = 0; i < n; ++i) {
    T d = s.wd != 0 ? g[i] + wd * p[i] : g[i];
    if (b) {
      b[i] = s.first ? d : b[i] * mom + keep * d;
      d = s.nesterov ? d + mom * b[i] : b[i];
    }
    p[i] = p[i] - lr * d;
  }
}

}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, double lr, double momentum, double dampening, double weight_decay,
         bool nesterov)
    : Optimizer("SGD", std::move(groups), lr, weight_decay,
                momentum != 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{}),
      momentum_(momentum), dampening_(dampening), nesterov_(nesterov) {
  HEED_CHECK(std::isfinite(momentum) && momentum >= 0, "SGD: invalid momentum ", momentum);
  HEED_CHECK(std::isfinite(dampening), "SGD: invalid dampening ", dampening);
  HEED_CHECK(!nesterov || (momentum > 0 && dampening == 0), "SGD: Nesterov momentum needs momentum > 0 and "
             "dampening 0 (got momentum ", momentum, ", dampening ", dampening, ")");
}

Optimizer::BlockUpdate SGD::prepare_update(const std::string&, const Tensor& p, const Tensor& grad, ParamState& s,
                                           const ParamGroup& group) {
  const bool first = momentum_ != 0 && s.empty();
  if (first) s.tensors = {{"momentum_buffer", Tensor::empty(p.shape(), p.dtype())}};
  const Tensor buf = momentum_ != 0 ? s.tensor("momentum_buffer") : Tensor();
  const SgdStep step{*group.lr, *group.weight_decay, momentum_, 1.0 - dampening_, first, nesterov_};
  return [p, grad, buf, step](int64_t i0, int64_t i1) {
    visit_dtype(p.dtype(), [&]<class T>() {
      sgd_kernel<T>(p.data<T>() + i0, grad.data<T>() + i0, buf.defined() ? buf.data<T>() + i0 : nullptr, i1 - i0,
                    step);
    });
  };
}

}  // namespace heed::optim
