// The everyday tensor API of issue 16: printing (operator<<, checked against
// PyTorch's repr).
#include <cmath>
#include <limits>
#include <sstream>

#include "fixture.h"
#include "test_util.h"

using namespace tmem;

namespace {

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

DType dtype_named(const std::string& s) {
  if (s == "float64") return DType::Float64;
  if (s == "int64") return DType::Int64;
  return DType::Float32;
}

}  // namespace

TEST_CASE("operator<< prints small, 0-d and empty tensors as PyTorch's repr") {
  CHECK(printed(tensor({1, 2, 3, 4}, {2, 2})) == "tensor([[1., 2.],\n        [3., 4.]])");
  CHECK(printed(tensor({3.5}, {})) == "tensor(3.5000)");
  CHECK(printed(tensor_int({7}, {})) == "tensor(7)");
  CHECK(printed(tensor({0.1, -2.5, 3.14159}, {3})) == "tensor([ 0.1000, -2.5000,  3.1416])");
  CHECK(printed(tensor({1e-5, 1.0, 12345.678}, {3})) == "tensor([1.0000e-05, 1.0000e+00, 1.2346e+04])");
  CHECK(printed(tensor({1.5, 2.25}, {2}, DType::Float64)) == "tensor([1.5000, 2.2500], dtype=torch.float64)");
  CHECK(printed(zeros({2, 0})) == "tensor([], size=(2, 0))");
  CHECK(printed(zeros({0}, DType::Int64)) == "tensor([], dtype=torch.int64)");
  CHECK(printed(Tensor()) == "tensor(undefined)");
  Tensor w = ones({2});
  w.requires_grad_();
  CHECK(printed(w) == "tensor([1., 1.], requires_grad=True)");
  CHECK(printed(mul(w, 2.0)) == "tensor([2., 2.], grad_fn=<mul_scalar>)");
  // A view prints its own elements.
  CHECK(printed(transpose(reshape(arange(0, 6), {2, 3}), 0, 1)) == "tensor([[0., 3.],\n        [1., 4.],\n        [2., 5.]])");
}

TEST_CASE("operator<< summarizes a tensor of more than 1000 elements with 3 edge items") {
  CHECK(printed(arange(0, 2000)) ==
        "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        "        1.9990e+03], size=(2000,))");
  CHECK(printed(reshape(arange(0, 1001, 1, DType::Int64), {1001, 1})) ==
        "tensor([[   0],\n        [   1],\n        [   2],\n        ...,\n"
        "        [ 998],\n        [ 999],\n        [1000]], size=(1001, 1))");
  // 1000 elements are printed whole.
  const std::string all = printed(arange(0, 1000, 1, DType::Int64));
  CHECK(all.find("...") == std::string::npos);
  CHECK(all.substr(all.size() - 6) == " 999])");
}

TEST_CASE("operator<< matches torch 1.13's repr on the tensor_repr fixtures") {
  const auto cases = test::load_fixture("tensor_repr");
  for (auto it = cases.begin(); it != cases.end(); ++it) {
    const std::string name = it.key();
    const nlohmann::json& c = it.value();
    INFO(name);
    Tensor t = test::fixture_tensor(c.at("tensor"), dtype_named(c.at("dtype")));
    if (c.at("requires_grad").get<bool>()) t.requires_grad_();
    // tmem also names the size of a summarized tensor ("tmem": torch's repr
    // with that suffix, placed by torch's own suffix layout).
    CHECK(printed(t) == c.value("tmem", c.at("repr").get<std::string>()));
  }
}
