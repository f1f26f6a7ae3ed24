#include "rms_norm.h"

#include <cmath>

using namespace heed;

// Forward, per row of C: rstd = 1 / sqrt(mean(x^2) + eps); y = x * rstd * w.
template <class T>
static void rms_norm_forward(T* y, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps) {
  for (int64_t i = 0; i < N; ++i) {
    const T* xi = x + i * C;
    double ms = 0;
    for (int64_t j = 0; j < C; ++j) ms += double(xi[j]) * xi[j];
    const T r = T(1.0 / std::sqrt(ms / C + eps));
    rstd[i] = r;
    for (int64_t j = 0; j < C; ++j) y[i * C + j] = xi[j] * r * w[j];
  }
}

// Backward, with n = x * rstd: dw += sum_rows(dy * n); dx = rstd * (dy*w - n * mean(dy*w*n)).
template <class T>
static void rms_norm_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd,
                              int64_t N, int64_t C) {
  for (int64_t i = 0; i < N; ++i) {
    const T* xi = x + i * C;
    const T* gi = dy + i * C;
    const T r = rstd[i];
    double dot = 0;
    for (int64_t j = 0; j < C; ++j) dot += double(gi[j]) * w[j] * xi[j] * r;
    const T m = T(dot / C);
    for (int64_t j = 0; j < C; ++j) {
      const T n = xi[j] * r;
      dw[j] += gi[j] * n;
      dx[i * C + j] = r * (gi[j] * w[j] - n * m);
    }
  }
}

Tensor rms_norm(const Tensor& x_in, const Tensor& weight, double eps) {
  const int64_t C = x_in.size(-1);
  HEED_CHECK(weight.shape() == Shape{C}, "rms_norm: weight ", to_string(weight.shape()),
             " does not match the last axis of x ", to_string(x_in.shape()));
  const Tensor x = x_in.contiguous(), w = weight.contiguous();
  const int64_t N = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor rstd = Tensor::empty({N}, x.dtype());
  visit_dtype(x.dtype(), [&]<class T>() {
    rms_norm_forward<T>(y.data<T>(), rstd.data<T>(), x.data<T>(), w.data<T>(), N, C, eps);
  });
  return record("rms_norm", y, {x, w}, [x = x.detach(), w = w.detach(), rstd, N, C](const Tensor& g) {
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    Tensor dw = Tensor::zeros(w.shape(), w.dtype());
    visit_dtype(x.dtype(), [&]<class T>() {
      rms_norm_backward<T>(dx.data<T>(), dw.data<T>(), g.data<T>(), x.data<T>(), w.data<T>(),
                           rstd.data<T>(), N, C);
    });
    return std::vector<Tensor>{dx, dw};
  }, {x, w});
}

RMSNorm::RMSNorm(int64_t dim, double eps) : eps_(eps) {
  register_parameter("weight", weight, Tensor::ones({dim}));
}
