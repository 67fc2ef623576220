// The README example: a 2-layer MLP trained on a generated 3-arm spiral with
// tmem's C++ API (tensors, autograd, plain SGD). Exits with status 1 unless it
// reaches the accuracy the README states (>= 95% train accuracy), so CTest
// runs it as a test.
#include <cmath>
#include <cstdio>
#include <numbers>

#include <tmem/tmem.h>

using namespace tmem;

// X[N*K, 2] float32, y[N*K] int64: K spiral arms of N points each (seeded).
static std::pair<Tensor, Tensor> make_spiral(int64_t K, int64_t N, Generator& gen) {
  std::vector<double> xs;
  std::vector<int64_t> ys;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < N; ++i) {
      double r = static_cast<double>(i) / N;
      double t = 4.0 * k + 4.0 * r + 0.2 * gen.normal();
      xs.insert(xs.end(), {r * std::sin(t), r * std::cos(t)});
      ys.push_back(k);
    }
  return {tensor(xs, {K * N, 2}), tensor_int(ys, {K * N})};
}

static double accuracy(const Tensor& logits, const Tensor& y) {
  std::vector<int64_t> pred = max(logits, 1).indices.to_int_vector(), truth = y.to_int_vector();
  int64_t hit = 0;
  for (size_t i = 0; i < pred.size(); ++i) hit += pred[i] == truth[i];
  return static_cast<double>(hit) / static_cast<double>(pred.size());
}

int main() {
  Generator gen(0);
  auto [x, y] = make_spiral(3, 200, gen);
  Tensor w1 = randn({2, 128}, 0, 1.0, DType::Float32, gen).requires_grad_();
  Tensor b1 = zeros({128}).requires_grad_();
  Tensor w2 = randn({128, 3}, 0, 0.1, DType::Float32, gen).requires_grad_();
  Tensor b2 = zeros({3}).requires_grad_();
  double acc = 0;
  for (int step = 1; step <= 3000; ++step) {
    Tensor logits = matmul(relu(matmul(x, w1) + b1), w2) + b2;
    Tensor loss = cross_entropy(logits, y);
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor* p : {&w1, &b1, &w2, &b2}) {
      add_(*p, p->grad() * -0.5);  // SGD, learning rate 0.5
      p->zero_grad();
    }
    acc = accuracy(logits, y);
    if (step % 500 == 0) std::printf("step %4d  loss %.4f  train accuracy %.1f%%\n", step, loss.item(), 100 * acc);
  }
  std::printf("final train accuracy %.1f%% (target >= 95%%)\n", 100 * acc);
  return acc >= 0.95 ? 0 : 1;
}
