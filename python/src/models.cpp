// tmem.models: the diagnostic tasks, the transformer backbones (with Tensor
// Memory) and the diagnostic model, so a training loop can be written in
// Python over the same C++ model the `tmem train` trainer uses; and that
// trainer itself (TrainConfig, train_diagnostic). Sampling, forward passes and training
// release the GIL.
#include "common.h"
#include "tmem/models/diagnostic.h"
#include "tmem/models/trainer.h"

namespace tmem::py_bind {

namespace {

using release_gil = py::call_guard<py::gil_scoped_release>;
using namespace tmem::models;

/// The keyword arguments `kwargs` set as attributes of a new T (a config
/// struct); an unknown key raises AttributeError naming it.
template <class T>
T config_from_kwargs(const py::kwargs& kwargs) {
  py::object obj = py::cast(T());
  for (auto [key, value] : kwargs) {
    const auto name = key.template cast<std::string>();
    if (!py::hasattr(obj, name.c_str()))
      throw py::attribute_error(py::str(obj.get_type().attr("__name__")).cast<std::string>() +
                                ": unknown key \"" + name + "\"");
    obj.attr(key) = value;
  }
  return obj.template cast<T>();
}

/// A TrainResult as a dict (the keys of its fields).
py::dict result_dict(const TrainResult& r) {
  py::dict d;
  d["losses"] = r.losses;
  d["train_accuracy"] = r.train_accuracy;
  d["accuracy_curve"] = r.accuracy_curve;
  d["eval_accuracy"] = r.eval_accuracy;
  d["eval_accuracy_observed"] = r.eval_accuracy_observed;
  d["gates"] = r.gates;
  d["eval_accuracy_memory_off"] = r.eval_accuracy_memory_off;
  d["seconds"] = r.seconds;
  d["parameters"] = r.parameters;
  d["start_step"] = r.start_step;
  d["stopped_at"] = r.stopped_at;
  d["state_floats"] = r.state_floats;
  return d;
}

/// Gives the bound configuration class `name` of mm copy.copy and
/// copy.deepcopy: a copy of its values (a module built from a config keeps
/// such a copy, so that changing the config later changes no copy of it).
/// Throws TypeError for an instance of a Python subclass, whose own
/// attributes a copy of the C++ values would lose.
template <class C>
void bind_copy(py::module_& mm, const char* name) {
  const auto copy = [name](const py::object& self) {
    if (!py::type::of(self).is(py::type::of<C>()))
      throw py::type_error(std::string("copy: an instance of a subclass of ") + name +
                           " cannot be copied (its own attributes would be lost); copy a " + name + " instead");
    return self.cast<C>();
  };
  py::reinterpret_borrow<py::class_<C>>(mm.attr(name))
      .def("__copy__", copy)
      .def("__deepcopy__", [copy](const py::object& self, const py::dict&) { return copy(self); }, py::arg("memo"));
}

}  // namespace

void bind_models(py::module_& m) {
  py::module_ mm = m.def_submodule("models", "The diagnostic tasks, the backbones and the diagnostic model.");

  py::class_<TaskConfig>(mm, "TaskConfig", "Parameters of the diagnostic tasks; each task reads the ones it uses.")
      .def(py::init(&config_from_kwargs<TaskConfig>),
           "Defaults with the given keys set: W, noise, queries, T, L, length, P, G (AttributeError for others).")
      .def_readwrite("W", &TaskConfig::W, "coord-binding / coord-recall: written keys.")
      .def_readwrite("noise", &TaskConfig::noise, "coord-binding: query key noise s.")
      .def_readwrite("queries", &TaskConfig::queries, "coord-binding: query tokens.")
      .def_readwrite("T", &TaskConfig::T, "map-building / map-recall: observation tokens.")
      .def_readwrite("L", &TaskConfig::L, "occlusion: frames the ball is hidden.")
      .def_readwrite("length", &TaskConfig::length, "no-harm: sequence length.")
      .def_readwrite("P", &TaskConfig::P, "mqar: key-value pairs.")
      .def_readwrite("G", &TaskConfig::G, "mqar, coord-recall: distractor segments.");

  py::class_<TaskBatch>(mm, "TaskBatch",
      "One batch of a task: features [B,T,F] float32, ids [B,T] int64, targets [B,T] int64 (-100: no loss), "
      "observed [B,T] int64; each None when the task has none.")
      .def_property_readonly("features", [](const TaskBatch& b) { return tensor_or_none(b.features); })
      .def_property_readonly("ids", [](const TaskBatch& b) { return tensor_or_none(b.ids); })
      .def_property_readonly("targets", [](const TaskBatch& b) { return tensor_or_none(b.targets); })
      .def_property_readonly("observed", [](const TaskBatch& b) { return tensor_or_none(b.observed); })
      .def("__copy__", [](const TaskBatch& b) { return b; }, "A batch sharing these tensors.")
      .def("__deepcopy__", [](const TaskBatch& b, const py::dict& memo) {
             const py::object deepcopy = py::module_::import("copy").attr("deepcopy");
             auto copy = [&](const Tensor& t) { return t.defined() ? deepcopy(py::cast(t), memo).cast<Tensor>() : Tensor(); };
             return TaskBatch{copy(b.features), copy(b.ids), copy(b.targets), copy(b.observed)};
           }, py::arg("memo"), "A batch holding copies of these tensors (copy.deepcopy; pickling's TypeError before).");

  py::class_<Task>(mm, "Task", "A synthetic diagnostic task (docs/DESIGN.md §8), sampled from a Generator.")
      .def("feature_dim", &Task::feature_dim, "F, the continuous input features per token (0: none).")
      .def("vocab", &Task::vocab, "The id vocabulary (0: no ids).")
      .def("classes", &Task::classes, "The output classes.")
      .def("seq_len", &Task::seq_len, "T, tokens per sequence.")
      .def("default_chunk", &Task::default_chunk, "The Tensor Memory chunk that suits the task.")
      .def("default_dim", &Task::default_dim, "The model width of the reference configuration.")
      .def("segment", &Task::segment, "Tokens per segment of the segmented tasks (0: unsegmented).")
      .def("sample", &Task::sample, py::arg("batch_size"), py::arg("generator"), release_gil(),
           "A fresh batch of batch_size sequences drawn from generator.");
  mm.def("make_task", [](const std::string& name, const TaskConfig& config) { return make_task(name, config); },
         py::arg("name"), py::arg("config"), "The task named name with the parameters of a TaskConfig.");
  mm.def("make_task", [](const std::string& name, const py::kwargs& kwargs) {
           return make_task(name, config_from_kwargs<TaskConfig>(kwargs));
         }, py::arg("name"),
         "The task named name (coord-binding, map-building, occlusion, occlusion-visible, no-harm, mqar, map-recall, "
         "coord-recall) with TaskConfig keys as keywords. Raises tmem.ValueError for an unknown name or bad "
         "parameters.");

  py::class_<nn::TensorMemoryOptions>(mm, "TensorMemoryOptions", "The options of a Tensor Memory layer.")
      .def(py::init(&config_from_kwargs<nn::TensorMemoryOptions>), "Defaults with the given keys set.")
      .def_readwrite("channels", &nn::TensorMemoryOptions::channels, "Cm, state channels.")
      .def_readwrite("D", &nn::TensorMemoryOptions::D, "State grid depth.")
      .def_readwrite("H", &nn::TensorMemoryOptions::H, "State grid height.")
      .def_readwrite("W", &nn::TensorMemoryOptions::W, "State grid width.")
      .def_readwrite("chunk", &nn::TensorMemoryOptions::chunk, "Tokens per read/write step.")
      .def_readwrite("sigma_scale", &nn::TensorMemoryOptions::sigma_scale, "Write width multiplier.")
      .def_readwrite("gamma_init", &nn::TensorMemoryOptions::gamma_init, "Initial gate logit.")
      .def_readwrite("dropout", &nn::TensorMemoryOptions::dropout, "Dropout on the read output.")
      .def_readwrite("shared_coords", &nn::TensorMemoryOptions::shared_coords,
                     "One coordinate head for read and write.")
      .def_readwrite("hard_write", &nn::TensorMemoryOptions::hard_write, "Ablation: write to the nearest cell only.")
      .def_readwrite("factorized", &nn::TensorMemoryOptions::factorized, "False: pointwise-only ConvLSTM3D update.");

  py::class_<BackboneConfig>(mm, "BackboneConfig",
                             "The configuration of a transformer backbone (models/transformer.h).")
      .def(py::init(&config_from_kwargs<BackboneConfig>), "Defaults with the given keys set.")
      .def_property(
          "method", [](const BackboneConfig& c) { return to_string(c.method); },
          [](BackboneConfig& c, const std::string& name) { c.method = parse_backbone_method(name); },
          "base, base_wide, slots, tensor, linear, ssm or rmt (and none, full, xl for the segmented tasks); "
          "tmem.ValueError for another name.")
      .def_property(
          "attention", [](const BackboneConfig& c) { return to_string(c.attention); },
          [](BackboneConfig& c, const std::string& name) { c.attention = parse_attention(name); },
          "full, local, linear or xl; tmem.ValueError for another name.")
      .def_readwrite("window", &BackboneConfig::window, "Local attention window.")
      .def_readwrite("dim", &BackboneConfig::dim, "C, the model width.")
      .def_readwrite("layers", &BackboneConfig::layers, "Blocks.")
      .def_readwrite("heads", &BackboneConfig::heads, "Attention heads.")
      .def_readwrite("max_len", &BackboneConfig::max_len, "Learned positions.")
      .def_readwrite("cache_len", &BackboneConfig::cache_len, "xl: cached tokens per layer.")
      .def_readwrite("cache_grad", &BackboneConfig::cache_grad, "xl: gradients into the cache.")
      .def_readwrite("linear_features", &BackboneConfig::linear_features, "linear: features per head.")
      .def_readwrite("ssm_state", &BackboneConfig::ssm_state, "ssm: state dimension N.")
      .def_readwrite("memory_tokens", &BackboneConfig::memory_tokens, "rmt: memory tokens R.")
      .def_readwrite("mlp_hidden", &BackboneConfig::mlp_hidden, "MLP width (0: the method's ratio times dim).")
      .def_readwrite("dropout", &BackboneConfig::dropout, "Dropout probability.")
      .def_readwrite("causal", &BackboneConfig::causal, "False: bidirectional attention.")
      .def_readwrite("positions", &BackboneConfig::positions, "False: no learned absolute positions.")
      .def_readwrite("memory_every", &BackboneConfig::memory_every, "Memory in every n-th block.")
      .def_readwrite("memory", &BackboneConfig::memory, "The TensorMemoryOptions of the memory layers.")
      .def_readwrite("leaky_memory", &BackboneConfig::leaky_memory, "Ablation: one state shared by all layers.");

  py::class_<Block, nn::Module, std::shared_ptr<Block>>(mm, "Block",
      "A pre-norm block: attention, an optional memory layer, an MLP.")
      .def_readonly("ln1", &Block::ln1)
      .def_readonly("ln2", &Block::ln2)
      .def_readonly("attn", &Block::attn)
      .def_readonly("mlp", &Block::mlp)
      .def_readonly("ln_mem", &Block::ln_mem, "The memory's LayerNorm (None without a memory layer).")
      .def_readonly("memory", &Block::memory, "The block's TensorMemory layer (None unless method tensor).");
  py::class_<Backbone, nn::Module, std::shared_ptr<Backbone>>(mm, "Backbone",
      "Learned positions, blocks and a final LayerNorm: x [B,T,C] -> [B,T,C].")
      .def(py::init([](const BackboneConfig& cfg, Generator* g) {
             return std::make_shared<Backbone>(cfg, g ? *g : default_generator());
           }), py::arg("config"), py::kw_only(), py::arg("generator") = nullptr, py::keep_alive<1, 3>(),
           "Raises tmem.ValueError for a bad config. The generator also drives dropout, "
           "so it lives as long as the backbone.")
      .def("forward", py::overload_cast<const Tensor&>(&Backbone::forward, py::const_), py::arg("x"), release_gil(),
           "One sequence x [B,T,C] from a fresh state -> [B,T,C]; tmem.ShapeError when T > max_len or C != dim.")
      .def_property_readonly("blocks", [](const Backbone& b) {
             for (const auto& [name, child] : b.named_children())
               if (name == "blocks") return child;
             throw ValueError("Backbone.blocks: no child named blocks");
           },
                             "The blocks, in order: the ModuleList registered as \"blocks\", so that its name in "
                             "named_modules() (blocks.0.attn) is also a getattr path.")
      .def_property_readonly("config", [](const Backbone& b) { return b.cfg; },
                             "A copy of the config the backbone was built with (editing it changes nothing).");
  mm.def("memory_gates", &memory_gates, py::arg("backbone"),
         "sigmoid(gamma) of each Tensor Memory layer, in block order (empty without memory layers).");

  py::class_<DiagnosticModel, nn::Module, std::shared_ptr<DiagnosticModel>>(mm, "DiagnosticModel",
      "The model of every diagnostic task: Linear(F -> C)(features) + Embedding(vocab, C)(ids), a Backbone, and "
      "a Linear(C -> classes) head.")
      .def(py::init([](const Task& task, const BackboneConfig& cfg, Generator* g) {
             return std::make_shared<DiagnosticModel>(task, cfg, g ? *g : default_generator());
           }), py::arg("task"), py::arg("config"), py::kw_only(), py::arg("generator") = nullptr,
           py::keep_alive<1, 4>(),
           "A model for task with the backbone config (dim, method, memory); raises tmem.ValueError for a method "
           "the task does not take. The generator also drives dropout, so it lives as long as the model.")
      .def("forward", py::overload_cast<const TaskBatch&>(&DiagnosticModel::forward, py::const_), py::arg("batch"),
           release_gil(), "Logits [B,T,classes] of a TaskBatch.")
      .def_readonly("input_proj", &DiagnosticModel::input_proj, "Linear(F -> C) (None when F = 0).")
      .def_readonly("id_emb", &DiagnosticModel::id_emb, "Embedding(vocab, C) (None when vocab = 0).")
      .def_readonly("backbone", &DiagnosticModel::backbone)
      .def_readonly("head", &DiagnosticModel::head)
      .def("memory_layers", [](const DiagnosticModel& d) {
             std::vector<std::shared_ptr<nn::TensorMemory>> out;
             for (const auto& b : d.backbone->blocks())
               if (b->memory) out.push_back(b->memory);
             return out;
           }, "The TensorMemory layers, in block order.");

  py::class_<TrainConfig>(mm, "TrainConfig",
      "The configuration of one `tmem train` run (models/trainer.h), made from the JSON keys a run records "
      "(results.json, --config): task, W, noise, steps, batch, seed, lr, method, dim, chunk, ...")
      .def(py::init([](const py::dict& keys) {
             TrainConfig c;
             apply_config_json(c, json_of(keys, "TrainConfig"));
             resolve_task_defaults(c);
             return c;
           }), py::arg("keys") = py::dict(),
           "The defaults with keys applied and dim / chunk left at 0 set to the task's; tmem.ValueError for an "
           "unknown key, a value of the wrong type or an unknown task.")
      .def_readwrite("task", &TrainConfig::task, "The task name.")
      .def_readwrite("task_cfg", &TrainConfig::task_cfg, "The task's parameters (a TaskConfig).")
      .def_readwrite("steps", &TrainConfig::steps, "Training steps.")
      .def_readwrite("batch", &TrainConfig::batch, "Sequences per step.")
      .def_readwrite("seed", &TrainConfig::seed, "Model init uses Generator(seed), the data Generator(seed + 1).")
      .def_readwrite("lr", &TrainConfig::lr, "AdamW learning rate.")
      .def_readwrite("weight_decay", &TrainConfig::weight_decay, "AdamW weight decay.")
      .def_readwrite("clip", &TrainConfig::clip, "Gradient norm clip.")
      .def_readwrite("eval_batches", &TrainConfig::eval_batches, "Held-out batches of the final accuracy.")
      .def_readwrite("model", &TrainConfig::model, "The BackboneConfig (method, dim, layers, memory, ...).")
      .def_readwrite("dump_grads", &TrainConfig::dump_grads, "Gradient dump file (\"\": none).")
      .def_readwrite("dump_every", &TrainConfig::dump_every, "Steps between gradient dumps.")
      .def("to_dict", [](const TrainConfig& c) { return py_of(config_to_json(c)); },
           "The keys of the config its method reads, as `tmem train` records them in results.json.");
  bind_copy<TaskConfig>(mm, "TaskConfig");
  bind_copy<nn::TensorMemoryOptions>(mm, "TensorMemoryOptions");
  bind_copy<BackboneConfig>(mm, "BackboneConfig");
  bind_copy<TrainConfig>(mm, "TrainConfig");

  mm.def("train_diagnostic", [](const TrainConfig& cfg, const py::object& progress) {
           std::function<void(const TrainProgress&)> cb;
           if (!progress.is_none())
             cb = [&progress](const TrainProgress& p) {
               py::gil_scoped_acquire gil;
               progress(p.step, p.steps, p.loss, p.accuracy, p.steps_per_second);
             };
           TrainResult r;
           {
             py::gil_scoped_release release;
             r = train_diagnostic(cfg, cb);
           }
           return result_dict(r);
         }, py::arg("config"), py::arg("progress") = py::none(),
         "Runs the C++ trainer of `tmem train` on one TrainConfig (the GIL released while it trains); "
         "progress(step, steps, loss, accuracy, steps_per_second) is called every step. Returns the result as a "
         "dict (losses, eval_accuracy, seconds, ...). Raises tmem.ValueError for a bad config.");
}

}  // namespace tmem::py_bind
