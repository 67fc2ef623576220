// The README's "everyday C++ API" tour (the README shows this file from its
// first #include on; CTest's readme_everyday_api keeps the two the same):
// tensors from and over std::vector, printing, a Sequential model, AdamW
// with weight-decay groups and a shuffling DataLoader, trained on 1024
// points labelled by the largest of three linear scores. Exits with status
// 1 below 95% train accuracy, so CTest runs it as a test.
#include <iostream>
#include <memory>
#include <vector>

#include <tmem/core/parallel.h>
#include <tmem/nn/container.h>
#include <tmem/nn/data_loader.h>
#include <tmem/nn/linear.h>
#include <tmem/nn/optim.h>
#include <tmem/ops/ops.h>
using namespace tmem;

int main() {
  set_num_threads(2);                                   // OpenMP threads of the CPU kernels
  std::vector<float> raw = {0, 1, 2, 3, 4, 5};
  Tensor a = tensor(raw, {2, 3});                       // a copy; std::vector<int64_t> gives int64
  Tensor b = from_blob(raw.data(), {2, 3});             // no copy: raw must outlive b
  std::cout << a << "\n";                               // tensor([[0., 1., 2.],
                                                        //         [3., 4., 5.]])
  Tensor idx = argmax(b, 1);                            // tensor([2, 2]); argmax(b): flattened, 0-d
  Tensor xs = linspace(-1, 1, 5), ys = arange(5);       // -1, -0.5, 0, 0.5, 1 and 0, 1, 2, 3, 4 (float32)

  Generator gen(0);
  Tensor x_train = randn({1024, 2}, 0, 1, DType::Float32, gen);                   // [1024, 2] float32
  Tensor y_train = argmax(matmul(x_train, tensor({1, 0, -1, 0, 1, -1}, {2, 3})), 1);  // [1024] int64 in 0..2
  auto model = std::make_shared<nn::Sequential>(        // parameters "0.weight", "0.bias", "2.weight", ...
      std::make_shared<nn::Linear>(2, 16, true, gen),
      std::make_shared<nn::Functional>([](const Tensor& x) { return relu(x); }),
      std::make_shared<nn::Linear>(16, 3, true, gen));
  // Weight decay on the matrices only: biases, gains and memory gates get none.
  nn::AdamW opt(nn::weight_decay_groups(*model, 0.01), 1e-2);
  nn::DataLoader loader({x_train, y_train}, {64, /*shuffle=*/true, /*drop_last=*/true}, gen);
  for (int epoch = 0; epoch < 10; ++epoch)
    for (const std::vector<Tensor>& batch : loader) {  // a fresh order every epoch
      Tensor loss = cross_entropy(model->forward(batch[0]), batch[1]);
      loss.backward();
      opt.step();
      opt.zero_grad();
    }

  NoGradGuard no_grad;
  const std::vector<int64_t> pred = argmax(model->forward(x_train), 1).to_int_vector(), truth = y_train.to_int_vector();
  int64_t hits = 0;
  for (size_t i = 0; i < pred.size(); ++i) hits += pred[i] == truth[i];
  std::cout << "train accuracy " << 100.0 * hits / pred.size() << "%\n";
  return hits >= 0.95 * pred.size() ? 0 : 1;
}
