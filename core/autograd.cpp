#include "tmem/core/autograd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "tmem/core/device_backend.h"
#include "tmem/core/grad_buffer.h"
#include "tmem/core/grad_hooks.h"
#include "tmem/core/profiler.h"
#include "tmem/core/strided.h"

namespace tmem {

namespace {
std::atomic<int64_t> g_live_nodes{0};
std::atomic<uint64_t> g_next_seq{0};
thread_local bool t_grad_mode = true;
thread_local bool t_anomaly = false;
thread_local std::vector<std::shared_ptr<Node>>* t_free_list = nullptr;

// The node whose backward function the engine is running on this thread,
// the engine's pending gradients, and the pending gradients input_grad_buffer
// lent to that backward (input, tensor): the engine does not sum those again.
struct RunningBackward {
  const Node* node = nullptr;
  std::unordered_map<Node*, std::vector<Tensor>>* pending = nullptr;
  std::vector<std::pair<size_t, const TensorImpl*>> lent;
};
thread_local RunningBackward* t_running = nullptr;

// The post-accumulate-grad hooks (core/grad_hooks.h), by leaf. The weak
// pointer tells a live leaf from a dead one whose address was reused.
struct HookEntry {
  uint64_t id;
  std::weak_ptr<TensorImpl> leaf;
  PostAccumulateGradHook fn;
};
std::mutex g_hook_mutex;
std::unordered_map<const TensorImpl*, std::vector<HookEntry>> g_hooks;
std::atomic<uint64_t> g_next_hook_id{1};
std::atomic<size_t> g_hook_count{0};
size_t g_hooks_purge_at = 64;  // under g_hook_mutex

// The leaves that have hooks now (empty without a lock when none has).
std::unordered_set<const TensorImpl*> hooked_leaves() {
  std::unordered_set<const TensorImpl*> out;
  if (g_hook_count.load() == 0) return out;
  std::lock_guard lock(g_hook_mutex);
  for (const auto& [impl, entries] : g_hooks) out.insert(impl);
  return out;
}

// Calls leaf's live hooks (outside the lock: a hook may take long or register hooks).
void run_post_accumulate_grad_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  std::vector<PostAccumulateGradHook> fns;
  {
    std::lock_guard lock(g_hook_mutex);
    auto it = g_hooks.find(leaf.get());
    if (it == g_hooks.end()) return;
    for (const HookEntry& h : it->second)
      if (h.leaf.lock() == leaf) fns.push_back(h.fn);
  }
  const Tensor t(leaf);
  for (const auto& fn : fns) fn(t);
}

// dst += src, same shape and device, in place.
void add_into(const Tensor& dst, const Tensor& src) {
  if (!dst.device().is_cpu()) {
    const Device d = dst.device();
    device_backend(d, "accumulate_grad")
        .accumulate(d.index,
                    strided_args<2>(dst.shape(), {dst.strides(), src.strides()},
                                    {dst.raw_data(), src.raw_data()}, "accumulate_grad"),
                    dst.dtype());
    dst.bump_version();
    return;
  }
  dispatch_floating(dst.dtype(), "accumulate_grad", [&]<class T>() {
    T* d = dst.data<T>();
    const T* s = src.data<T>();
    for_each_row<2>(dst.shape(), {dst.strides(), src.strides()},
                    [&](std::array<int64_t, 2> o, int64_t len, std::array<int64_t, 2> st) {
                      if (st[0] == 1 && st[1] == 1) {
                        T* __restrict dd = d + o[0];
                        const T* __restrict ss = s + o[1];
#pragma omp simd
                        for (int64_t i = 0; i < len; ++i) dd[i] += ss[i];
                        return;
                      }
                      for (int64_t i = 0; i < len; ++i) d[o[0] + i * st[0]] += s[o[1] + i * st[1]];
                    });
  });
  dst.bump_version();
}

Tensor clone_data(const Tensor& t) {
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  copy_data(out, t);
  return out;
}

// a + b (same shape and device) into a new contiguous tensor, in one pass on
// the CPU.
Tensor sum_data(const Tensor& a, const Tensor& b) {
  if (!a.device().is_cpu()) {
    Tensor out = clone_data(a);
    add_into(out, b);
    return out;
  }
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  dispatch_floating(a.dtype(), "accumulate_grad", [&]<class T>() {
    T* o = out.data<T>();
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    for_each_row<3>(a.shape(), {out.strides(), a.strides(), b.strides()},
                    [&](std::array<int64_t, 3> off, int64_t len, std::array<int64_t, 3> st) {
                      if (st[1] == 1 && st[2] == 1) {
                        T* __restrict oo = o + off[0];
                        const T* __restrict xx = x + off[1];
                        const T* __restrict yy = y + off[2];
#pragma omp simd
                        for (int64_t i = 0; i < len; ++i) oo[i] = xx[i] + yy[i];
                        return;
                      }
                      for (int64_t i = 0; i < len; ++i)
                        o[off[0] + i] = x[off[1] + i * st[1]] + y[off[2] + i * st[2]];
                    });
  });
  return out;
}

// Whether t is a contiguous tensor whose storage nobody else can see: no
// other handle, no view and no other tensor on the storage. Such a gradient,
// handed over by a backward function, may be summed into in place or kept as
// a leaf's .grad without a copy.
bool sole_owner(const Tensor& t) {
  const TensorImpl& i = t.impl();
  return t.impl_ptr().use_count() == 1 && i.storage.use_count() == 1 && !i.is_view &&
         i.offset == 0 && t.is_contiguous();
}

void check_grad_meta(const Tensor& g, const Shape& shape, DType dtype, Device device,
                     const char* op, const char* what) {
  check<ShapeError>(g.shape() == shape, "accumulate_grad: ", op, " produced a gradient of shape ",
                    shape_str(g.shape()), " for ", what, " of shape ", shape_str(shape));
  check<DtypeError>(g.dtype() == dtype, "accumulate_grad: ", op, " produced a ",
                    dtype_name(g.dtype()), " gradient for ", what, " of dtype ", dtype_name(dtype));
  check<DeviceError>(g.device() == device, "accumulate_grad: ", op, " produced a gradient on ",
                     g.device().str(), " for ", what, " on ", device.str());
}

// The gradient hooks (core/grad_hooks.h), by site: a leaf's TensorImpl
// (output -1) or the node output that made a non-leaf. The weak pointer
// tells a live owner from a dead one whose address was reused.
using GradHookKey = std::pair<const void*, int>;
struct GradHookSite {
  std::weak_ptr<void> owner;
  std::vector<std::pair<uint64_t, GradHook>> hooks;
  bool live(const void* key) const { return owner.lock().get() == key; }
};
std::map<GradHookKey, GradHookSite> g_grad_hooks;  // under g_hook_mutex
size_t g_grad_hooks_purge_at = 64;
std::atomic<size_t> g_grad_hook_sites{0};
// retain_grad's tensors, by tensor: backward finds each one's node output
// then, so an in-place op after retain_grad moves it along (as PyTorch's).
std::vector<std::weak_ptr<TensorImpl>> g_retained;  // under g_hook_mutex
std::atomic<size_t> g_retained_count{0};

GradHookKey grad_hook_key(const Tensor& t) {
  if (t.is_leaf()) return {t.impl_ptr().get(), -1};
  return {t.impl().grad_fn.get(), t.impl().output_nr};
}

// Hooks taken out of the registry under g_hook_mutex, destroyed after it is
// released: a Python hook's destructor takes the GIL, which a thread waiting
// for the mutex may hold. Declare one before the lock.
using DeadHooks = std::vector<std::pair<uint64_t, GradHook>>;

void bury(GradHookSite& site, DeadHooks& dead) {
  for (auto& h : site.hooks) dead.push_back(std::move(h));
  site.hooks.clear();
}

// t's live site, made on first use (dead sites are dropped as the registry
// doubles). The caller holds g_hook_mutex.
GradHookSite& grad_hook_site(const GradHookKey& key, const Tensor& t, DeadHooks& dead) {
  if (g_grad_hooks.size() >= g_grad_hooks_purge_at) {
    for (auto it = g_grad_hooks.begin(); it != g_grad_hooks.end();) {
      if (it->second.live(it->first.first)) {
        ++it;
        continue;
      }
      bury(it->second, dead);
      it = g_grad_hooks.erase(it);
    }
    g_grad_hooks_purge_at = std::max<size_t>(64, 2 * g_grad_hooks.size());
  }
  GradHookSite& site = g_grad_hooks[key];
  if (!site.live(key.first)) {
    bury(site, dead);
    site = GradHookSite{};
    if (key.second < 0) site.owner = t.impl_ptr();
    else site.owner = t.impl().grad_fn;
  }
  g_grad_hook_sites.store(g_grad_hooks.size());
  return site;
}

// What one backward hooks: the leaves and nodes with gradient hooks, and
// the live retained tensors by the node output that makes each now (all
// empty, without a lock, when there are none).
struct GradHooked {
  std::unordered_set<const void*> leaves, nodes;
  std::map<GradHookKey, std::vector<std::shared_ptr<TensorImpl>>> retained;
};
GradHooked grad_hooked() {
  GradHooked out;
  if (g_grad_hook_sites.load() == 0 && g_retained_count.load() == 0) return out;
  std::vector<std::shared_ptr<TensorImpl>> retained;
  {
    std::lock_guard lock(g_hook_mutex);
    for (const auto& [key, site] : g_grad_hooks)
      (key.second < 0 ? out.leaves : out.nodes).insert(key.first);
    for (const auto& r : g_retained)
      if (auto t = r.lock()) retained.push_back(std::move(t));
  }
  for (auto& t : retained) {
    // A view whose base an in-place op (through the view, or another) has
    // written since re-bases first, so it retains its new value's gradient,
    // as its base does (PyTorch 2); outside the lock, as it records a node.
    Tensor(t).sync_view();
    if (!t->grad_fn) continue;
    out.nodes.insert(t->grad_fn.get());
    out.retained[{t->grad_fn.get(), t->output_nr}].push_back(std::move(t));
  }
  return out;
}

// Drops the hooks of a node whose graph backward freed.
void forget_grad_hooks(const Node* node) {
  DeadHooks dead;
  std::lock_guard lock(g_hook_mutex);
  for (auto it = g_grad_hooks.lower_bound({node, 0}); it != g_grad_hooks.end() && it->first.first == node;) {
    bury(it->second, dead);
    it = g_grad_hooks.erase(it);
  }
  g_grad_hook_sites.store(g_grad_hooks.size());
}

// Runs the gradient hooks of site `key` on g (outside the lock, as the
// post-accumulate ones), then adds the result into the .grad of `retained`
// (the retained tensors the site makes); returns the gradient to pass on.
Tensor run_grad_hooks(GradHookKey key, Tensor g,
                      const std::vector<std::shared_ptr<TensorImpl>>* retained = nullptr) {
  std::vector<GradHook> fns;
  {
    std::lock_guard lock(g_hook_mutex);
    auto it = g_grad_hooks.find(key);
    if (it != g_grad_hooks.end() && it->second.live(key.first))
      for (const auto& h : it->second.hooks) fns.push_back(h.second);
  }
  for (const GradHook& fn : fns) {
    Tensor r = fn(g);
    if (!r.defined()) continue;
    check<ValueError>(r.shape() == g.shape(), "register_hook: a hook returned a gradient of shape ",
                      shape_str(r.shape()), " for a tensor of shape ", shape_str(g.shape()));
    check<ValueError>(r.dtype() == g.dtype(), "register_hook: a hook returned a ", dtype_name(r.dtype()),
                      " gradient for a tensor of dtype ", dtype_name(g.dtype()));
    check<ValueError>(r.device() == g.device(), "register_hook: a hook returned a gradient on ",
                      r.device().str(), " for a tensor on ", g.device().str());
    g = r.requires_grad() ? r.detach() : std::move(r);
  }
  if (retained)
    for (const auto& t : *retained) {
      if (t->grad) add_into(Tensor(t->grad), g);
      else t->grad = clone_data(g).impl_ptr();
    }
  return g;
}

}  // namespace

Node::Node() { g_live_nodes.fetch_add(1, std::memory_order_relaxed); }

Node::~Node() {
  g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
  // Freeing a long chain must not recurse once per node: every edge's node
  // goes onto a thread-local list that the outermost destructor drains, so a
  // node dies there, not inside its child's destructor. All of them, not only
  // those this node owns alone: a node reached by two edges (copy_slices's
  // base and its re-based view) would die as the second edge's member is
  // destroyed, after this body, recursing once per node.
  auto collect = [this](std::vector<std::shared_ptr<Node>>& list) {
    for (auto& e : next)
      if (e.fn) list.push_back(std::move(e.fn));
  };
  if (t_free_list) {
    collect(*t_free_list);
    return;
  }
  std::vector<std::shared_ptr<Node>> list;
  t_free_list = &list;
  collect(list);
  while (!list.empty()) {
    std::shared_ptr<Node> n = std::move(list.back());
    list.pop_back();
    n.reset();
  }
  t_free_list = nullptr;
}

std::string Node::name() const {
  return std::string(op_name(op)) + " (node #" + std::to_string(seq) + ")";
}

int64_t live_node_count() { return g_live_nodes.load(); }

bool grad_enabled() { return t_grad_mode; }
void set_grad_enabled(bool enabled) { t_grad_mode = enabled; }
NoGradGuard::NoGradGuard() : prev_(t_grad_mode) { t_grad_mode = false; }
NoGradGuard::~NoGradGuard() { t_grad_mode = prev_; }

bool anomaly_enabled() { return t_anomaly; }
AnomalyModeGuard::AnomalyModeGuard(bool on) : prev_(t_anomaly) { t_anomaly = on; }
AnomalyModeGuard::~AnomalyModeGuard() { t_anomaly = prev_; }

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!t_grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!t_grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void check_finite(const Tensor& t, const std::string& what, bool allow_inf) {
  if (!t.defined() || !is_floating(t.dtype())) return;
  if (!t.device().is_cpu()) return check_finite(t.detach().cpu(), what, allow_inf);
  dispatch_floating(t.dtype(), "check_finite", [&]<class T>() {
    const T* p = t.data<T>();
    int64_t idx = 0;
    for_each_element<1>(t.shape(), {t.strides()}, [&](std::array<int64_t, 1> o) {
      T v = p[o[0]];
      if (std::isnan(v) || (!allow_inf && std::isinf(v)))
        throw ValueError(detail::cat("anomaly: ", what, " has ", std::isnan(v) ? "NaN" : "Inf",
                                     " at flat index ", idx, " of shape ", shape_str(t.shape())));
      ++idx;
    });
  });
}

std::shared_ptr<Node> record(OpId op, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs, const std::vector<Tensor>& saved,
                             BackwardFn backward) {
  if (detail::g_profiling.load(std::memory_order_relaxed)) detail::profiler_note_record(op);
  for (const Tensor& o : outputs) {  // a view op's output remembers its base (Tensor::sync_view)
    TensorImpl& oi = o.impl();
    if (!oi.is_view) continue;
    for (const Tensor& in : inputs) {
      if (!in.defined() || in.impl().storage != oi.storage) continue;
      const auto& up = in.impl().view_base;
      oi.view_base = up && up->storage == oi.storage ? up : in.impl_ptr();
      oi.view_history = oi.storage->history.load();
      break;
    }
  }
  // Stale views re-base first: their new nodes must come before this one in
  // creation order, which backward runs in reverse.
  for (const Tensor& in : inputs)
    if (in.defined()) in.sync_view();
  if (!needs_grad(inputs)) return nullptr;
  auto node = std::make_shared<Node>();
  node->op = op;
  node->seq = g_next_seq.fetch_add(1);
  node->backward = std::move(backward);
  node->next.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) {
      node->input_shapes.emplace_back();
      node->input_dtypes.push_back(DType::Float32);
      node->input_devices.emplace_back();
      continue;
    }
    node->input_shapes.push_back(t.shape());
    node->input_dtypes.push_back(t.dtype());
    node->input_devices.push_back(t.device());
    if (!t.requires_grad()) continue;
    if (t.impl().grad_fn) {
      node->next[i].fn = t.impl().grad_fn;
      node->next[i].output_nr = t.impl().output_nr;
    } else {
      node->next[i].leaf = t.impl_ptr();
    }
  }
  for (const Tensor& s : saved) node->saved.push_back({s.defined() ? s.detach() : Tensor(),
                                                       s.defined() ? s.version() : 0});
  for (size_t k = 0; k < outputs.size(); ++k) {
    TensorImpl& o = outputs[k].impl();
    node->output_shapes.push_back(o.shape);
    node->output_dtypes.push_back(o.dtype);
    node->device = o.storage->device;
    o.grad_fn = node;
    o.output_nr = static_cast<int>(k);
    o.requires_grad = true;
    if (t_anomaly) check_finite(outputs[k], "output " + std::to_string(k) + " of " + node->name(), true);
  }
  return node;
}

uint64_t register_post_accumulate_grad_hook(const Tensor& t, PostAccumulateGradHook hook) {
  check<ValueError>(t.defined() && t.is_leaf() && t.requires_grad(),
                    "register_post_accumulate_grad_hook: expected a leaf tensor that requires grad");
  const uint64_t id = g_next_hook_id.fetch_add(1);
  std::vector<HookEntry> dead;  // destroyed after the lock, as DeadHooks
  std::lock_guard lock(g_hook_mutex);
  if (g_hooks.size() >= g_hooks_purge_at) {  // the hooks of leaves that died
    for (auto& [impl, entries] : g_hooks)
      std::erase_if(entries, [&dead](HookEntry& h) {
        if (!h.leaf.expired()) return false;
        dead.push_back(std::move(h));
        return true;
      });
    std::erase_if(g_hooks, [](const auto& kv) { return kv.second.empty(); });
    g_hooks_purge_at = std::max<size_t>(64, 2 * g_hooks.size());
  }
  g_hooks[t.impl_ptr().get()].push_back({id, t.impl_ptr(), std::move(hook)});
  g_hook_count.fetch_add(1);
  g_hook_count.fetch_sub(dead.size());
  return id;
}

uint64_t register_hook(const Tensor& t, GradHook hook) {
  check<ValueError>(static_cast<bool>(hook), "register_hook: expected a hook, but got an empty function");
  check<ValueError>(t.defined() && t.requires_grad(),
                    "register_hook: cannot register a hook on a tensor that does not require grad");
  const GradHookKey key = grad_hook_key(t);
  DeadHooks dead;
  std::lock_guard lock(g_hook_mutex);
  GradHookSite& site = grad_hook_site(key, t, dead);
  const uint64_t id = g_next_hook_id.fetch_add(1);
  site.hooks.emplace_back(id, std::move(hook));
  return id;
}

void remove_hook(uint64_t id) {
  DeadHooks dead;
  std::lock_guard lock(g_hook_mutex);
  for (auto& [key, site] : g_grad_hooks) {
    auto hit = std::find_if(site.hooks.begin(), site.hooks.end(), [id](const auto& h) { return h.first == id; });
    if (hit == site.hooks.end()) continue;
    dead.push_back(std::move(*hit));
    site.hooks.erase(hit);
    if (site.hooks.empty()) g_grad_hooks.erase(key);
    g_grad_hook_sites.store(g_grad_hooks.size());
    return;
  }
}

void retain_grad(const Tensor& t) {
  check<ValueError>(t.defined() && t.requires_grad(), "retain_grad: can't retain_grad on a tensor that does not "
                                                      "require grad");
  if (t.is_leaf()) return;
  std::lock_guard lock(g_hook_mutex);
  if (std::any_of(g_retained.begin(), g_retained.end(), [&t](const auto& r) { return r.lock() == t.impl_ptr(); }))
    return;
  std::erase_if(g_retained, [](const auto& r) { return r.expired(); });
  g_retained.push_back(t.impl_ptr());
  g_retained_count.store(g_retained.size());
}

bool retains_grad(const Tensor& t) {
  if (!t.defined() || t.is_leaf() || g_retained_count.load() == 0) return false;
  std::lock_guard lock(g_hook_mutex);
  return std::any_of(g_retained.begin(), g_retained.end(), [&t](const auto& r) { return r.lock() == t.impl_ptr(); });
}

void remove_post_accumulate_grad_hook(uint64_t id) {
  PostAccumulateGradHook removed;  // destroyed after the lock, as DeadHooks
  std::lock_guard lock(g_hook_mutex);
  for (auto it = g_hooks.begin(); it != g_hooks.end(); ++it) {
    auto& entries = it->second;
    auto hit = std::find_if(entries.begin(), entries.end(), [id](const HookEntry& h) { return h.id == id; });
    if (hit == entries.end()) continue;
    removed = std::move(hit->fn);
    entries.erase(hit);
    if (entries.empty()) g_hooks.erase(it);
    g_hook_count.fetch_sub(1);
    return;
  }
}

void accumulate_grad(TensorImpl& leaf, const Tensor& grad, const char* op) {
  check_grad_meta(grad, leaf.shape, leaf.dtype, leaf.storage->device, op, "a leaf");
  if (!leaf.grad) {
    leaf.grad = clone_data(grad).impl_ptr();
  } else {
    add_into(Tensor(leaf.grad), grad);
  }
}

namespace {

// accumulate_grad for a gradient the engine owns: the leaf's first gradient
// is kept as it is when nobody else can see it (no copy).
void accumulate_owned_grad(TensorImpl& leaf, Tensor grad, const char* op) {
  if (!leaf.grad && grad.impl_ptr()->grad_fn == nullptr && !grad.requires_grad() &&
      sole_owner(grad)) {
    check_grad_meta(grad, leaf.shape, leaf.dtype, leaf.storage->device, op, "a leaf");
    leaf.grad = grad.impl_ptr();
    return;
  }
  accumulate_grad(leaf, grad, op);
}

// acc += g for two gradients of one tensor: in place in whichever of the two
// nobody else can see, else into a new tensor. Addition commutes exactly, so
// every path gives the same bits.
void sum_into(Tensor& acc, Tensor g) {
  if (sole_owner(acc)) {
    add_into(acc, g);
  } else if (sole_owner(g)) {
    add_into(g, acc);
    acc = std::move(g);
  } else {
    acc = sum_data(acc, g);
  }
}

}  // namespace

GradBuffer input_grad_buffer(const Node& n, size_t i) {
  check<ValueError>(i < n.input_shapes.size(), "input_grad_buffer: ", n.name(), " has ",
                    n.input_shapes.size(), " inputs, not an input ", i);
  const auto fresh = [&] { return GradBuffer{empty(n.input_shapes[i], n.input_dtypes[i], n.input_devices[i]), false}; };
  if (!t_running || t_running->node != &n || i >= n.next.size() || !n.next[i].fn) return fresh();
  const Edge& e = n.next[i];
  for (size_t j = 0; j < n.next.size(); ++j)  // op(x, x): the other input's gradient is summed as usual
    if (j != i && n.next[j].fn == e.fn && n.next[j].output_nr == e.output_nr) return fresh();
  auto it = t_running->pending->find(e.fn.get());
  if (it == t_running->pending->end() || !it->second[e.output_nr].defined()) return fresh();
  Tensor& acc = it->second[e.output_nr];
  if (!sole_owner(acc)) return fresh();
  t_running->lent.emplace_back(i, &acc.impl());
  return GradBuffer{acc, true};
}

namespace {

// What grad() asks the engine for: the gradients reaching these leaves and
// node outputs are summed here, and no leaf's .grad changes.
struct Capture {
  std::unordered_map<const TensorImpl*, size_t> leaves;
  std::map<std::pair<const Node*, int>, size_t> outputs;
  std::vector<Tensor> grads;

  // A copy first: the engine may later add into the tensor it passed on.
  void add(size_t i, const Tensor& g) {
    if (grads[i].defined()) add_into(grads[i], g);
    else grads[i] = clone_data(g);
  }
};

// The root's gradient: grad_output (cast to the root's floating dtype, as
// PyTorch), or ones for a one-element root. `who` names the caller in errors.
Tensor root_seed(const Tensor& root, const Tensor& grad_output, const char* who) {
  check<ValueError>(root.requires_grad(), who, ": the tensor does not require grad and has no grad_fn");
  Tensor seed = grad_output;
  if (!seed.defined()) {
    check<ValueError>(root.numel() == 1, who,
                      ": a gradient can be created implicitly only for a one-element "
                      "output, but got shape ", shape_str(root.shape()));
    seed = ones(root.shape(), root.dtype(), root.device());
  }
  if (seed.dtype() != root.dtype() && is_floating(seed.dtype()) && is_floating(root.dtype())) {
    Tensor cast = empty(seed.shape(), root.dtype(), seed.device());
    copy_data(cast, seed);
    seed = cast;
  }
  check_grad_meta(seed, root.shape(), root.dtype(), root.device(), who, "the root");
  return seed;
}

// The engine: backpropagates seed from root through its graph, into the
// leaves' .grad, or with `capture` into capture->grads only (no leaf hooks
// run then; the hooks of non-leaf tensors do).
void run_backward(const Tensor& root, Tensor seed, bool retain_graph, Capture* capture) {
  // The engine's own work (ordering nodes, summing and routing gradients)
  // is this region's self time; each backward function is a range of its op.
  const RecordFunction engine("autograd engine", ProfilePhase::Backward);
  NoGradGuard no_grad;
  if (root.is_leaf()) {
    if (capture) {
      if (const auto it = capture->leaves.find(&root.impl()); it != capture->leaves.end()) capture->add(it->second, seed);
      return;
    }
    if (g_grad_hook_sites.load() != 0) seed = run_grad_hooks(grad_hook_key(root), seed);
    accumulate_grad(root.impl(), seed, "backward");
    run_post_accumulate_grad_hooks(root.impl_ptr());
    return;
  }

  // Collect the reachable nodes iteratively, then order them by creation.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<Node*> seen;
  std::vector<std::shared_ptr<Node>> stack{root.impl().grad_fn};
  seen.insert(stack.back().get());
  // For each hooked leaf, the edges into it not processed yet: its hooks run
  // when the count reaches zero. A leaf with gradient hooks collects its
  // gradients in leaf_grads until then.
  std::unordered_set<const TensorImpl*> hooked = capture ? std::unordered_set<const TensorImpl*>() : hooked_leaves();
  GradHooked grad_hooks = grad_hooked();
  if (capture) grad_hooks.leaves.clear();
  for (const void* leaf : grad_hooks.leaves) hooked.insert(static_cast<const TensorImpl*>(leaf));
  std::unordered_map<const TensorImpl*, Tensor> leaf_grads;
  std::unordered_map<const TensorImpl*, int64_t> leaf_edges_left;
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    check<ValueError>(!n->released, "backward: trying to backward through ", n->name(),
                      " whose saved tensors were already freed by an earlier backward; pass "
                      "retain_graph=true to the first backward to go through the graph twice");
    for (const Edge& e : n->next) {
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn);
      if (e.leaf && hooked.count(e.leaf.get())) ++leaf_edges_left[e.leaf.get()];
    }
    order.push_back(std::move(n));
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a->seq > b->seq; });

  std::unordered_map<Node*, std::vector<Tensor>> pending;
  pending[root.impl().grad_fn.get()].resize(root.impl().grad_fn->output_shapes.size());
  pending[root.impl().grad_fn.get()][root.impl().output_nr] = seed;

  auto finish_leaf_edges = [&leaf_edges_left, &leaf_grads](const Node& n) {
    if (leaf_edges_left.empty()) return;
    for (const Edge& e : n.next) {
      if (!e.leaf) continue;
      auto left = leaf_edges_left.find(e.leaf.get());
      if (left == leaf_edges_left.end() || --left->second != 0) continue;
      if (auto g = leaf_grads.find(e.leaf.get()); g != leaf_grads.end()) {
        Tensor sum = run_grad_hooks({e.leaf.get(), -1}, std::move(g->second));
        leaf_grads.erase(g);
        accumulate_owned_grad(*e.leaf, std::move(sum), "register_hook");
      }
      run_post_accumulate_grad_hooks(e.leaf);
    }
  };
  for (const auto& node : order) {
    auto it = pending.find(node.get());
    if (it == pending.end()) {
      finish_leaf_edges(*node);
      continue;
    }
    std::vector<Tensor> grads = std::move(it->second);
    pending.erase(it);
    grads.resize(node->output_shapes.size());
    const bool node_hooked = grad_hooks.nodes.count(node.get()) != 0;
    for (size_t k = 0; k < grads.size(); ++k)
      if (node_hooked && grads[k].defined()) {
        const GradHookKey key{node.get(), static_cast<int>(k)};
        const auto retained = grad_hooks.retained.find(key);
        grads[k] = run_grad_hooks(key, std::move(grads[k]),
                                  retained == grad_hooks.retained.end() ? nullptr : &retained->second);
      }
    if (capture)
      for (size_t k = 0; k < grads.size(); ++k)
        if (const auto c = capture->outputs.find({node.get(), static_cast<int>(k)});
            c != capture->outputs.end() && grads[k].defined())
          capture->add(c->second, grads[k]);
    for (size_t k = 0; k < grads.size(); ++k)
      if (!grads[k].defined())
        grads[k] = zeros(node->output_shapes[k], node->output_dtypes[k], node->device);
    for (const SavedTensor& s : node->saved)
      if (s.data.defined() && s.data.version() != s.version)
        throw ValueError(detail::cat("backward: ", node->name(), ": a tensor saved for its backward "
                                     "was modified in place (saved at version ", s.version,
                                     ", now version ", s.data.version(),
                                     "); use an out-of-place op or clone it first"));
    std::vector<Tensor> in_grads;
    RunningBackward run{node.get(), &pending, {}};
    {
      const OpRange range(node->op, ProfilePhase::Backward);
      struct Running {  // restores the outer state, also when the backward throws
        RunningBackward* prev = t_running;
        ~Running() { t_running = prev; }
      } running;
      t_running = &run;
      in_grads = node->backward(*node, grads);
    }
    check<ValueError>(in_grads.size() == node->next.size(), "backward: ", node->name(),
                      " returned ", in_grads.size(), " gradients for ", node->next.size(),
                      " inputs");
    std::string op(op_name(node->op));
    for (size_t i = 0; i < in_grads.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.valid() || !in_grads[i].defined()) continue;
      check_grad_meta(in_grads[i], node->input_shapes[i], node->input_dtypes[i],
                      node->input_devices[i], op.c_str(), "an input");
      if (t_anomaly)
        check_finite(in_grads[i], "the gradient that " + node->name() + " computed for input " +
                                      std::to_string(i));
      if (e.leaf && capture) {
        if (const auto c = capture->leaves.find(e.leaf.get()); c != capture->leaves.end())
          capture->add(c->second, in_grads[i]);
        continue;
      }
      if (e.leaf) {
        if (!grad_hooks.leaves.count(e.leaf.get())) {
          accumulate_owned_grad(*e.leaf, std::move(in_grads[i]), op.c_str());
          continue;
        }
        Tensor& sum = leaf_grads[e.leaf.get()];
        if (sum.defined()) sum_into(sum, std::move(in_grads[i]));
        else sum = std::move(in_grads[i]);
        continue;
      }
      auto& slot = pending[e.fn.get()];
      slot.resize(e.fn->output_shapes.size());
      Tensor& acc = slot[e.output_nr];
      const std::pair<size_t, const TensorImpl*> mine(i, &in_grads[i].impl());
      if (acc.defined() && &acc.impl() == mine.second &&
          std::find(run.lent.begin(), run.lent.end(), mine) != run.lent.end())
        continue;  // the backward added its gradient into the pending one (input_grad_buffer)
      if (acc.defined()) sum_into(acc, std::move(in_grads[i]));
      else acc = std::move(in_grads[i]);
    }
    finish_leaf_edges(*node);
    if (!retain_graph) {
      if (node_hooked) forget_grad_hooks(node.get());
      node->released = true;
      node->saved.clear();
      node->backward = nullptr;
      node->next.clear();
    }
  }
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  run_backward(root, root_seed(root, grad_output, "backward"), retain_graph, nullptr);
}

std::vector<Tensor> grad(const Tensor& root, const std::vector<Tensor>& inputs, const Tensor& grad_output,
                         bool retain_graph, bool allow_unused) {
  Tensor seed = root_seed(root, grad_output, "grad");
  Capture capture;
  capture.grads.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    check<ValueError>(x.defined() && x.requires_grad(), "grad: input ", i,
                      " does not require grad, so it has no gradient");
    if (x.is_leaf()) capture.leaves.emplace(&x.impl(), i);
    else capture.outputs.emplace(std::make_pair(x.impl().grad_fn.get(), static_cast<int>(x.impl().output_nr)), i);
  }
  run_backward(root, std::move(seed), retain_graph, &capture);
  // An input named twice gets its gradient in each place.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const size_t first = x.is_leaf() ? capture.leaves.at(&x.impl())
                                     : capture.outputs.at({x.impl().grad_fn.get(), static_cast<int>(x.impl().output_nr)});
    if (first != i) capture.grads[i] = capture.grads[first];
    check<ValueError>(allow_unused || capture.grads[i].defined(), "grad: input ", i,
                      " was not used to compute the root, so it has no gradient; pass allow_unused=true to get "
                      "an undefined tensor (None) for it");
  }
  return capture.grads;
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  tmem::backward(*this, grad_output, retain_graph);
}

void Tensor::rebase_view() const {
  TensorImpl& v = impl();
  const uint64_t now = v.storage->history.load();
  const Tensor base(v.view_base);
  if (v.view_base->storage != v.storage) {  // set_data gave the base other data: v keeps the old
    v.view_history = now;
    return;
  }
  const bool needs = base.requires_grad();
  check<ValueError>(!needs || base.is_contiguous(), "autograd: a view of shape ", shape_str(v.shape),
                    " was taken before an in-place op gave its base a new history, and its base of shape ",
                    shape_str(base.shape()), " is not contiguous, so the view cannot be re-based; take "
                    "the view after the in-place op");
  for (size_t d = 0; d < v.shape.size(); ++d)
    check<ValueError>(!needs || v.strides[d] != 0 || v.shape[d] <= 1, "autograd: a broadcast view of shape ",
                      shape_str(v.shape), " was taken before an in-place op gave its base a new history "
                      "and cannot be re-based; take the view after the in-place op");
  v.view_history = now;
  v.grad_fn = nullptr;
  v.output_nr = 0;
  v.requires_grad = false;
  if (!needs) return;
  struct GradModeOn {  // a re-base is part of the view's history, also under NoGradGuard
    bool prev = t_grad_mode;
    GradModeOn() { t_grad_mode = true; }
    ~GradModeOn() { t_grad_mode = prev; }  // also when anomaly mode refuses the view
  } grad_mode_on;
  const OpRange range(OpId::Slice);
  record(OpId::Slice, {base}, {*this}, {},
         [in = base.shape(), shape = v.shape, strides = v.strides,
          off = v.offset - base.offset()](const Node&, const std::vector<Tensor>& g) {
           Tensor gin = zeros(in, g[0].dtype(), g[0].device());
           copy_data(make_view(gin, shape, strides, off), g[0]);
           return std::vector<Tensor>{gin};
         });
}

namespace {

// Whether a layout may place two elements at one memory location: with the
// dims of size > 1 sorted by stride, each stride must pass the span of the
// smaller ones (the usual sufficient test of non-overlap). tmem's own views
// (slices, transposes, permutes) always pass; a NumPy as_strided window
// shared through from_numpy may not.
bool may_overlap(const Shape& shape, const Shape& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size)
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) dims.emplace_back(std::abs(strides[d]), shape[d]);
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;  // elements covered by the dims so far, from one corner
  for (const auto& [stride, size] : dims) {
    if (stride < span) return true;
    span = stride * (size - 1) + span;
  }
  return false;
}

}  // namespace

namespace {

// The history of an in-place op on a view (PyTorch's CopySlices): the
// view's base becomes its old self with the view's window replaced by
// result, so the base's old history gets the base's gradient with that window
// zeroed and result gets the window. The view, and every other view of the
// base, then re-bases onto the base's new history (Tensor::sync_view).
void commit_into_view(const Tensor& self, const Tensor& result, const char* op) {
  const std::shared_ptr<TensorImpl>& base_impl = self.impl().view_base;
  check<ValueError>(base_impl && base_impl->storage == self.impl().storage, op, ": an in-place update that needs "
                    "grad of a view of shape ", shape_str(self.shape()), " whose base is not known; use the "
                    "out-of-place op");
  const Tensor base(base_impl);
  check<ValueError>(base.is_contiguous(), op, ": an in-place update that needs grad of a view of shape ",
                    shape_str(self.shape()), " of a base of shape ", shape_str(base.shape()), " and strides ",
                    shape_str(base.strides()), " that is not contiguous; use the out-of-place op, or take the view "
                    "of a contiguous() copy");
  // The base's history before the write, as an input of the new node.
  auto old = std::make_shared<TensorImpl>();
  old->storage = base_impl->storage;
  old->shape = base_impl->shape;
  old->strides = base_impl->strides;
  old->offset = base_impl->offset;
  old->dtype = base_impl->dtype;
  old->requires_grad = base.requires_grad();
  old->grad_fn = base_impl->grad_fn;
  old->output_nr = base_impl->output_nr;
  const OpRange range(OpId::CopySlices);
  record(OpId::CopySlices, {Tensor(old), result}, {base}, {},
         [shape = self.shape(), strides = self.strides(),
          off = self.offset() - base.offset()](const Node&, const std::vector<Tensor>& g) {
           Tensor g_base = empty(g[0].shape(), g[0].dtype(), g[0].device());
           copy_data(g_base, g[0]);
           const Tensor window = make_view(g_base, shape, strides, off);
           Tensor g_result = empty(shape, g[0].dtype(), g[0].device());
           copy_data(g_result, window);
           copy_data(window, zeros(shape, g[0].dtype(), g[0].device()));
           return std::vector<Tensor>{g_base, g_result};
         });
  base_impl->storage->history.fetch_add(1);
}

}  // namespace

void commit_inplace(const Tensor& self, const Tensor& result, const char* op) {
  check<ShapeError>(result.shape() == self.shape(), op, ": the result of shape ", shape_str(result.shape()),
                    " does not fit in the tensor of shape ", shape_str(self.shape()), " it would be written into");
  // An expanded tensor (stride 0 along a dim of size > 1) holds each stored
  // element at several indices: writing it keeps one of their values and
  // drops the rest (PyTorch refuses it alike).
  for (int64_t d = 0; d < self.dim(); ++d)
    check<ValueError>(self.strides()[d] != 0 || self.shape()[d] <= 1, op, ": the tensor of shape ",
                      shape_str(self.shape()), " and strides ", shape_str(self.strides()),
                      " (an expand) has several elements at one memory location (dim ", d,
                      "), so an in-place write would keep only one of their values; write into a copy "
                      "(contiguous()) or into the tensor before expand");
  // Contiguous, the common case, cannot overlap: no sort on every in-place op.
  check<ValueError>(self.is_contiguous() || !may_overlap(self.shape(), self.strides()), op, ": the tensor of shape ", shape_str(self.shape()),
                    " and strides ", shape_str(self.strides()), " may hold several elements at one memory location "
                    "(its strides overlap, as a NumPy as_strided window's), so an in-place write could keep only one "
                    "of their values; write into a copy (contiguous())");
  const bool new_history = t_grad_mode && (self.requires_grad() || result.requires_grad());
  if (t_grad_mode) {
    check<ValueError>(!(self.requires_grad() && self.is_leaf()), op,
                      ": a leaf tensor that requires grad is used in an in-place operation; "
                      "wrap the update in NoGradGuard (Python: with tmem.no_grad())");
    // Also a view of one, even taken under no_grad (PyTorch refuses both):
    // the write would change the leaf's values outside the tape.
    const auto& base = self.impl().view_base;
    check<ValueError>(!(self.impl().is_view && base && base->requires_grad && !base->grad_fn), op,
                      ": a view of a leaf tensor that requires grad is used in an in-place operation; "
                      "wrap the update in NoGradGuard (Python: with tmem.no_grad())");
    // A view taken under no_grad of a tensor with history has none itself:
    // the write would change the base's values outside the tape (PyTorch
    // refuses it alike).
    check<ValueError>(!(self.impl().is_view && base && base->requires_grad && !self.requires_grad()), op,
                      ": a view was taken under no_grad of a tensor that requires grad and is written in grad "
                      "mode, which would change that tensor's values outside its history; take the view in "
                      "grad mode, or write under no_grad");
  }
  copy_data(self, result);
  if (new_history && self.impl().is_view) {
    commit_into_view(self, result, op);
  } else if (new_history) {
    TensorImpl& s = self.impl();
    s.grad_fn = result.impl().grad_fn;
    s.output_nr = result.impl().output_nr;
    s.requires_grad = result.requires_grad();
    s.storage->history.fetch_add(1);
  }
}

}  // namespace tmem
