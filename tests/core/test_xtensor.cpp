// The opt-in xtensor interop (core/xtensor_interop.h): a heed tensor seen through xtensor without
// a copy, and heed tensors made from xtensor expressions of several layouts and types.
#include <catch2/catch.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include "core/heed.h"
#include "core/xtensor_interop.h"

using namespace heed;

TEST_CASE("xtensor: a contiguous tensor seen as an xtensor expression, no copy", "[xtensor]") {
  Tensor t = Tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  auto view = as_xtensor<float>(t);
  REQUIRE(view.shape()[0] == 2);
  REQUIRE(view.shape()[1] == 3);
  REQUIRE(view(1, 2) == 6.0f);
  REQUIRE(xt::sum(view)() == 21.0f);
  view(0, 1) = 7.0f;  // writes reach the tensor's storage
  REQUIRE(t.at({0, 1}) == 7.0);
  REQUIRE(&view(0, 0) == t.data<float>());
  // A non-contiguous tensor or a wrong element type is refused by name.
  REQUIRE_THROWS_WITH(as_xtensor<float>(t.transpose(0, 1)), Catch::Contains("not contiguous"));
  REQUIRE_THROWS_WITH(as_xtensor<double>(t), Catch::Contains("data<float64>() on a float32 tensor"));
  auto ids = as_xtensor<int64_t>(Tensor({3, 4}));
  REQUIRE(ids(1) == 4);
}

TEST_CASE("xtensor: a tensor from any xtensor expression", "[xtensor]") {
  xt::xarray<double> a = {{1, 2}, {3, 4}};
  Tensor t = from_xtensor(a * 2.0 + 1.0);  // a lazy expression
  REQUIRE(t.dtype() == DType::f64);
  REQUIRE(t.shape() == Shape{2, 2});
  REQUIRE(t.to_vector<double>() == std::vector<double>{3, 5, 7, 9});
  // A column-major array comes out row-major; a strided view; a fixed-rank xtensor of int32.
  xt::xarray<float, xt::layout_type::column_major> c = {{1, 2, 3}, {4, 5, 6}};
  REQUIRE(from_xtensor(c).to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  REQUIRE(from_xtensor(xt::view(c, xt::all(), 1)).to_vector<float>() == std::vector<float>{2, 5});
  xt::xtensor<int32_t, 1> ids = {5, 6, 7};
  Tensor it = from_xtensor(ids);
  REQUIRE(it.dtype() == DType::i32);
  REQUIRE(it.to_vector<int64_t>() == std::vector<int64_t>{5, 6, 7});
  // A copy: later changes to the array do not reach the tensor.
  a(0, 0) = 100;
  Tensor t2 = from_xtensor(a);
  a(0, 0) = 1;
  REQUIRE(t2.at({0, 0}) == 100);
}
