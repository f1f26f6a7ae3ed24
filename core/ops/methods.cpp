// Tensor's method syntax (x.transpose(0, 1), x.matmul(w), x.sum(-1), x[i], ...): each method is
// the free op of the same name in core/ops.h, so the two spellings cannot drift apart.
#include "core/autograd.h"
#include "core/ops.h"

namespace heed {

Tensor Tensor::operator[](int64_t i) const { return heed::select(*this, 0, i); }
Tensor Tensor::select(int64_t axis, int64_t i) const { return heed::select(*this, axis, i); }
Tensor Tensor::reshape(Shape shape) const { return heed::reshape(*this, std::move(shape)); }
Tensor Tensor::view(Shape shape) const { return heed::view(*this, std::move(shape)); }
Tensor Tensor::transpose(int64_t axis0, int64_t axis1) const { return heed::transpose(*this, axis0, axis1); }
Tensor Tensor::permute(const std::vector<int64_t>& axes) const { return heed::permute(*this, axes); }
Tensor Tensor::unsqueeze(int64_t axis) const { return heed::unsqueeze(*this, axis); }
Tensor Tensor::squeeze(int64_t axis) const { return heed::squeeze(*this, axis); }
Tensor Tensor::squeeze() const { return heed::squeeze(*this); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return heed::flatten(*this, start_dim, end_dim); }
Tensor Tensor::expand(const Shape& shape) const { return heed::expand(*this, shape); }
Tensor Tensor::matmul(const Tensor& other) const { return heed::matmul(*this, other); }
Tensor Tensor::sum() const { return heed::sum(*this); }
Tensor Tensor::sum(int64_t axis, bool keepdim) const { return heed::sum(*this, axis, keepdim); }
Tensor Tensor::mean() const { return heed::mean(*this); }
Tensor Tensor::mean(int64_t axis, bool keepdim) const { return heed::mean(*this, axis, keepdim); }
Tensor Tensor::sum(const std::vector<int64_t>& axes, bool keepdim) const { return heed::sum(*this, axes, keepdim); }
Tensor Tensor::sum(std::initializer_list<int64_t> axes, bool keepdim) const { return heed::sum(*this, axes, keepdim); }
Tensor Tensor::mean(const std::vector<int64_t>& axes, bool keepdim) const { return heed::mean(*this, axes, keepdim); }
Tensor Tensor::mean(std::initializer_list<int64_t> axes, bool keepdim) const { return heed::mean(*this, axes, keepdim); }
Tensor Tensor::cumsum(int64_t axis) const { return heed::cumsum(*this, axis); }
Tensor Tensor::norm(double p) const { return heed::vector_norm(*this, p); }
Tensor Tensor::norm(double p, int64_t axis, bool keepdim) const { return heed::vector_norm(*this, p, {axis}, keepdim); }
Tensor Tensor::norm(double p, std::initializer_list<int64_t> axes, bool keepdim) const {
  return heed::vector_norm(*this, p, axes, keepdim);
}
Tensor Tensor::max() const { return heed::max(*this); }
Tensor Tensor::max(int64_t axis, bool keepdim) const { return heed::max(*this, axis, keepdim); }
Tensor Tensor::min() const { return heed::min(*this); }
Tensor Tensor::min(int64_t axis, bool keepdim) const { return heed::min(*this, axis, keepdim); }
Tensor Tensor::argmax() const { return heed::argmax(*this); }
Tensor Tensor::argmax(int64_t axis, bool keepdim) const { return heed::argmax(*this, axis, keepdim); }
Tensor Tensor::argmin() const { return heed::argmin(*this); }
Tensor Tensor::argmin(int64_t axis, bool keepdim) const { return heed::argmin(*this, axis, keepdim); }
Tensor Tensor::logsumexp(int64_t axis, bool keepdim) const { return heed::logsumexp(*this, axis, keepdim); }
Tensor Tensor::prod() const { return heed::prod(*this); }
Tensor Tensor::prod(int64_t axis, bool keepdim) const { return heed::prod(*this, axis, keepdim); }
Tensor Tensor::narrow(int64_t axis, int64_t start, int64_t length) const { return heed::narrow(*this, axis, start, length); }
std::vector<Tensor> Tensor::unbind(int64_t axis) const { return heed::unbind(*this, axis); }
Tensor Tensor::flip(const std::vector<int64_t>& axes) const { return heed::flip(*this, axes); }
Tensor Tensor::log1p() const { return heed::log1p(*this); }
Tensor Tensor::expm1() const { return heed::expm1(*this); }
Tensor Tensor::rsqrt() const { return heed::rsqrt(*this); }
Tensor Tensor::reciprocal() const { return heed::reciprocal(*this); }
Tensor Tensor::square() const { return heed::square(*this); }
Tensor Tensor::floor() const { return heed::floor(*this); }
Tensor Tensor::ceil() const { return heed::ceil(*this); }
Tensor Tensor::round() const { return heed::round(*this); }
Tensor Tensor::isnan() const { return heed::isnan(*this); }
Tensor Tensor::isinf() const { return heed::isinf(*this); }
Tensor Tensor::isfinite() const { return heed::isfinite(*this); }
Tensor Tensor::any() const { return heed::any(*this); }
Tensor Tensor::any(int64_t axis, bool keepdim) const { return heed::any(*this, axis, keepdim); }
Tensor Tensor::all() const { return heed::all(*this); }
Tensor Tensor::all(int64_t axis, bool keepdim) const { return heed::all(*this, axis, keepdim); }
bool Tensor::allclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return heed::allclose(*this, other, rtol, atol, equal_nan);
}
Tensor Tensor::amax(int64_t axis, bool keepdim) const { return heed::amax(*this, {axis}, keepdim); }
Tensor Tensor::amax(std::initializer_list<int64_t> axes, bool keepdim) const { return heed::amax(*this, axes, keepdim); }
Tensor Tensor::amin(int64_t axis, bool keepdim) const { return heed::amin(*this, {axis}, keepdim); }
Tensor Tensor::amin(std::initializer_list<int64_t> axes, bool keepdim) const { return heed::amin(*this, axes, keepdim); }
Tensor Tensor::softmax(int64_t axis) const { return heed::softmax(*this, axis); }
Tensor Tensor::log_softmax(int64_t axis) const { return heed::log_softmax(*this, axis); }
Tensor Tensor::abs() const { return heed::abs(*this); }
Tensor Tensor::exp() const { return heed::exp(*this); }
Tensor Tensor::log() const { return heed::log(*this); }
Tensor Tensor::sqrt() const { return heed::sqrt(*this); }
Tensor Tensor::tanh() const { return heed::tanh(*this); }
Tensor Tensor::relu() const { return heed::relu(*this); }
Tensor Tensor::sigmoid() const { return heed::sigmoid(*this); }
Tensor Tensor::sin() const { return heed::sin(*this); }
Tensor Tensor::cos() const { return heed::cos(*this); }
Tensor Tensor::clamp(std::optional<double> lo, std::optional<double> hi) const { return heed::clamp(*this, lo, hi); }
Tensor Tensor::var() const { return heed::var(*this); }
Tensor Tensor::var(int64_t axis, bool unbiased, bool keepdim) const { return heed::var(*this, axis, unbiased, keepdim); }
Tensor Tensor::std() const { return heed::std(*this); }
Tensor Tensor::std(int64_t axis, bool unbiased, bool keepdim) const { return heed::std(*this, axis, unbiased, keepdim); }
Tensor Tensor::pow(double exponent) const { return heed::pow(*this, exponent); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const { return heed::masked_fill(*this, mask, value); }
Tensor Tensor::eq(const Tensor& other) const { return heed::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return heed::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return heed::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return heed::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return heed::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return heed::ge(*this, other); }
Tensor Tensor::eq(double other) const { return heed::eq(*this, other); }
Tensor Tensor::ne(double other) const { return heed::ne(*this, other); }
Tensor Tensor::lt(double other) const { return heed::lt(*this, other); }
Tensor Tensor::le(double other) const { return heed::le(*this, other); }
Tensor Tensor::gt(double other) const { return heed::gt(*this, other); }
Tensor Tensor::ge(double other) const { return heed::ge(*this, other); }
Tensor Tensor::tril(int64_t k) const { return heed::tril(*this, k); }
Tensor Tensor::triu(int64_t k) const { return heed::triu(*this, k); }
Tensor Tensor::gather(int64_t axis, const Tensor& index) const { return heed::gather(*this, axis, index); }
Tensor Tensor::index_select(int64_t axis, const Tensor& index) const { return heed::index_select(*this, axis, index); }
Tensor Tensor::repeat(const Shape& repeats) const { return heed::repeat(*this, repeats); }
Tensor Tensor::scatter(int64_t axis, const Tensor& index, const Tensor& src) const {
  return heed::scatter(*this, axis, index, src);
}
Tensor Tensor::scatter_add(int64_t axis, const Tensor& index, const Tensor& src) const {
  return heed::scatter_add(*this, axis, index, src);
}
Tensor Tensor::index_add(int64_t axis, const Tensor& index, const Tensor& src, double alpha) const {
  return heed::index_add(*this, axis, index, src, alpha);
}
Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) const {
  return heed::index_put(*this, indices, values, accumulate);
}
ValuesIndices Tensor::sort(int64_t axis, bool descending) const { return heed::sort(*this, axis, descending); }
ValuesIndices Tensor::topk(int64_t k, int64_t axis, bool largest, bool sorted) const {
  return heed::topk(*this, k, axis, largest, sorted);
}
Tensor Tensor::argsort(int64_t axis, bool descending) const { return heed::argsort(*this, axis, descending); }
Tensor Tensor::multinomial(int64_t num_samples, bool replacement, Generator* gen) const {
  return heed::multinomial(*this, num_samples, replacement, gen);
}

// ---- in-place arithmetic: the out-of-place op's values, written back with copy_ (which counts
// the write in version()), outside autograd (Tensor::check_in_place_write says what is refused).

namespace {
// Writes `value` (computed from *this and `other`) into `t`, once `other` is known to broadcast
// to t's shape: `op` names the method in the error.
template <class Value>
Tensor& assign_result(Tensor& t, const Tensor& other, const char* op, const Value& value) {
  t.check_in_place_write(op);  // before the NoGradGuard below, which copy_'s own check would see
  if (other.defined()) {
    HEED_CHECK(other.dtype() == t.dtype(), op, ": a ", dtype_name(other.dtype()), " operand for a ",
               dtype_name(t.dtype()), " tensor");
    HEED_CHECK(broadcast_shapes(t.shape(), other.shape(), op) == t.shape(), op, ": ", to_string(other.shape()),
               " does not broadcast to this tensor's shape ", to_string(t.shape()));
  }
  NoGradGuard no_grad;
  t.copy_(value());
  return t;
}
}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  return assign_result(*this, other, "add_", [&] { return heed::add(*this, alpha == 1.0 ? other : heed::mul(other, alpha)); });
}
Tensor& Tensor::add_(double s) { return assign_result(*this, Tensor(), "add_", [&] { return heed::add(*this, s); }); }
Tensor& Tensor::sub_(const Tensor& other, double alpha) {
  return assign_result(*this, other, "sub_", [&] { return heed::sub(*this, alpha == 1.0 ? other : heed::mul(other, alpha)); });
}
Tensor& Tensor::sub_(double s) { return assign_result(*this, Tensor(), "sub_", [&] { return heed::add(*this, -s); }); }
Tensor& Tensor::mul_(const Tensor& other) { return assign_result(*this, other, "mul_", [&] { return heed::mul(*this, other); }); }
Tensor& Tensor::mul_(double s) { return assign_result(*this, Tensor(), "mul_", [&] { return heed::mul(*this, s); }); }
Tensor& Tensor::div_(const Tensor& other) { return assign_result(*this, other, "div_", [&] { return heed::div(*this, other); }); }
Tensor& Tensor::div_(double s) { return assign_result(*this, Tensor(), "div_", [&] { return heed::div(*this, s); }); }
Tensor& Tensor::zero_() {
  check_in_place_write("zero_", /*shared_elements_ok=*/true);
  fill_(0.0);
  return *this;
}

}  // namespace heed
