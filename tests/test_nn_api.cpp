// nn/ pieces of the everyday API (issue 16): Sequential / ModuleList /
// ModuleDict.
#include "tmem/core/safetensors.h"
#include "tmem/nn/container.h"
#include "tmem/nn/layers.h"
#include "test_util.h"

using namespace tmem;

namespace {

std::vector<std::string> names_of(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, t] : m.named_parameters()) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("Sequential: forward chains the modules, PyTorch names, state_dict round trip") {
  Generator g1(1), g2(2);
  auto make = [](Generator& g) {
    return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 2, true, g),
                                            std::make_shared<nn::Functional>([](const Tensor& x) { return relu(x); }),
                                            std::make_shared<nn::Linear>(2, 1, true, g));
  };
  auto seq = make(g1);
  CHECK(seq->size() == 3);
  CHECK(names_of(*seq) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  seq->load_state_dict({{"0.weight", tensor({1, -1, 2, 0.5}, {2, 2})},
                        {"0.bias", tensor({0.5, -1}, {2})},
                        {"2.weight", tensor({1, -2}, {1, 2})},
                        {"2.bias", tensor({0.25}, {1})}});
  // torch.nn.Sequential(Linear(2, 2), ReLU(), Linear(2, 1)) with these weights:
  // row 1: relu([-0.5, 2]) . [1, -2] + 0.25 = -3.75; row 2: relu([-3.5, -1.5]) -> 0.25.
  Tensor x = tensor({1, 2, -1, 3}, {2, 2});
  CHECK(seq->forward(x).to_vector() == std::vector<double>{-3.75, 0.25});
  // Through a file, into a differently initialised copy.
  const std::string path = test::tmp_path("tmem_sequential.safetensors");
  save_safetensors(path, seq->state_dict());
  auto other = make(g2);
  CHECK(other->forward(x).to_vector() != std::vector<double>{-3.75, 0.25});
  other->load_state_dict(load_safetensors(path).tensors);
  CHECK(other->forward(x).to_vector() == std::vector<double>{-3.75, 0.25});
  // Nested: a Sequential inside a Sequential; empty is the identity.
  nn::Sequential outer(seq, std::make_shared<nn::Sequential>());
  CHECK(names_of(outer).front() == "0.0.weight");
  CHECK(outer.forward(x).to_vector() == std::vector<double>{-3.75, 0.25});
  CHECK(nn::Sequential().forward(x).to_vector() == x.to_vector());
  // The gradient reaches every layer.
  sum(seq->forward(x)).backward();
  for (const Tensor& p : seq->parameters()) CHECK(p.grad().defined());
  CHECK(seq->parameters()[3].grad().to_vector() == std::vector<double>{2});
  CHECK_THROWS_AS((*seq)[3], IndexError);
  CHECK_THROWS_AS(seq->push_back(std::shared_ptr<nn::Linear>()), ValueError);
}

TEST_CASE("ModuleList and ModuleDict register their modules under PyTorch's names") {
  nn::ModuleList list(std::make_shared<nn::Linear>(3, 2), std::make_shared<nn::LayerNorm>(2));
  list.push_back(std::make_shared<nn::Linear>(2, 2, false));
  CHECK(list.size() == 3);
  CHECK(names_of(list) ==
        std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight"});
  CHECK(list.at<nn::Linear>(0)->in_features == 3);
  CHECK(list.at<nn::LayerNorm>(1)->eps == 1e-5);
  CHECK_THROWS_WITH_AS(list.at<nn::Linear>(1), "ModuleList::at: module 1 is not of the requested type", ValueError);
  CHECK_THROWS_WITH_AS(list[3], "ModuleList: index 3 is out of range for 3 modules", IndexError);
  size_t visited = 0;
  for (const auto& m : list) visited += m->parameters().size();
  CHECK(visited == 5);

  nn::ModuleDict dict;
  dict.insert("decoder", std::make_shared<nn::Linear>(2, 3));
  dict.insert("encoder", std::make_shared<nn::ModuleList>(std::make_shared<nn::Linear>(3, 2, false)));
  CHECK(dict.keys() == std::vector<std::string>{"decoder", "encoder"});  // insertion order
  CHECK(names_of(dict) == std::vector<std::string>{"decoder.weight", "decoder.bias", "encoder.0.weight"});
  CHECK(dict.contains("encoder"));
  CHECK_FALSE(dict.contains("head"));
  CHECK(dict.at<nn::Linear>("decoder")->out_features == 3);
  CHECK_THROWS_WITH_AS(dict["head"], "ModuleDict: no module under key \"head\"", IndexError);
  CHECK_THROWS_WITH_AS(dict.insert("a.b", std::make_shared<nn::LayerNorm>(2)),
                       doctest::Contains("contain no '.'"), ValueError);
  CHECK_THROWS_WITH_AS(dict.insert("decoder", std::make_shared<nn::LayerNorm>(2)),
                       "ModuleDict::insert: key \"decoder\" is already present", ValueError);
  // state_dict round trip and train/eval reach the children.
  nn::ModuleDict copy;
  copy.insert("decoder", std::make_shared<nn::Linear>(2, 3));
  copy.insert("encoder", std::make_shared<nn::ModuleList>(std::make_shared<nn::Linear>(3, 2, false)));
  copy.load_state_dict(dict.state_dict());
  for (const auto& [n, t] : copy.state_dict()) CHECK(t.to_vector() == dict.state_dict().at(n).to_vector());
  dict.eval();
  CHECK_FALSE(dict["encoder"]->is_training());
  CHECK_FALSE(dict.at<nn::ModuleList>("encoder")->at<nn::Linear>(0)->is_training());
}
