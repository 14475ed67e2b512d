#pragma once
// Framework policies: how a data-parallel framework turns gradients into collectives. A policy
// groups the gradient tensors (fusion buffers, buckets, one per variable), says when a group may
// start and what it costs besides the collective (negotiation, buffer copies). Policies are
// plug-ins registered by name (docs/simulator.md, "Framework policies"); both engines drive the
// same launcher, so they group gradients identically.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/registry.hpp"
#include "common/units.hpp"
#include "networks/collective.hpp"
#include "simulator/kernel.hpp"

namespace dlsim::simulator {

// The gradient compression of the optimizer wrapper or communication hook (docs/simulator.md,
// "Gradient compression"): none, or fp16 (each gradient or bucket cast to float16 for the
// exchange and back after it).
enum class GradientCompression { kNone, kFp16 };
// "none" or "fp16"; nullopt for anything else.
std::optional<GradientCompression> parse_gradient_compression(const std::string& text);
std::string to_string(GradientCompression c);

// How Horovod's ranks agree each cycle on the tensors ready everywhere (docs/simulator.md,
// "horovod"): the response cache's bit-vector allreduce (0.17 on), or rank 0 gathering the
// requests and broadcasting the responses (HOROVOD_CACHE_CAPACITY=0, or 0.16).
enum class Negotiation { kCache, kGather };
// "cache" or "gather"; nullopt for anything else.
std::optional<Negotiation> parse_negotiation(const std::string& text);
std::string to_string(Negotiation n);

// Gradients exchanged by one collective.
struct CommGroup {
  // Indices into the backward-order gradient list. A tensor cut into several groups (BytePS's
  // partitions) is named by its first group only; all of them start together.
  std::vector<int> tensors;
  double bytes = 0;
  networks::PsOptions ps;  // where a parameter-server exchange puts them
  Seconds negotiate;       // coordination before the group starts (Horovod)
  bool copy_in = false;    // copied into a fusion or bucket buffer before the collective...
  bool copy_out = false;   // ...and out of it after
  // The copies run on the compute stream (PyTorch DDP: autograd hooks copy each gradient in,
  // finalize_backward copies every bucket out once backward is done), not on the channel's.
  bool copies_on_compute = false;
  // Where the copies move another size than the wire's (PyTorch DDP's fp32 bucket under the fp16
  // hook): the bucket's bytes; 0: `bytes`.
  double buffer_bytes = 0;
  // Memory traffic (bytes read and written) of the kernels the compression adds on the copies'
  // stream, one entry per kernel: before the collective (cast, divide) and after it (cast back).
  std::vector<double> kernels_in, kernels_out;
};

// Settings a user may give a policy; each policy takes the ones it documents and refuses the
// others, naming the flag.
struct FrameworkOptions {
  std::optional<Bytes> fusion_threshold;   // horovod, keras
  std::optional<Seconds> cycle_time;       // horovod, keras
  std::optional<Negotiation> negotiation;  // horovod, keras
  // horovod, keras: the response cache's entries (HOROVOD_CACHE_CAPACITY, 1024 by default; 0
  // turns the cache off, as --negotiation gather).
  std::optional<int> cache_capacity;
  std::optional<Bytes> bucket_cap;    // pytorch-ddp
  std::optional<Bytes> first_bucket;  // pytorch-ddp
  std::optional<std::string> mode;    // tf-ps: parameter_server | distributed_replicated;
                                      // mxnet-kvstore: device | dist_sync
  std::optional<int> ps_servers;      // tf-ps, mxnet-kvstore dist_sync
  std::optional<bool> ps_on_gpu;
  std::optional<bool> ps_colocated;
  std::optional<Bytes> partition_bytes;  // byteps
  // horovod, keras, byteps: the optimizer wrapper's gradient compression (none | fp16): fp16
  // casts every floating gradient wider than 2 bytes to float16 before the exchange and back
  // after it (Compression.fp16 of horovod.tensorflow / horovod.torch and of byteps);
  // pytorch-ddp: fp16 is the communication hook fp16_compress_hook, a bucket at a time.
  std::optional<GradientCompression> compression;
  // horovod, keras, byteps: TensorFlow compiles the step with XLA auto-clustering, so the
  // gradients leave the compiled backward pass together (docs/simulator.md, "XLA").
  bool xla = false;
  // horovod, keras: GPU tensors are allreduced by MPI in host memory (Horovod built without
  // HOROVOD_GPU_ALLREDUCE): each buffer is copied to the host before and back after.
  bool host_staging = false;
};

// What a policy knows of the job when it plans a step.
struct JobInfo {
  int gpus = 1;
  int nodes = 1;
  int gpus_per_node = 1;
  std::vector<double> gradient_bytes;        // backward order
  std::vector<std::int64_t> gradient_elems;  // backward order
  // The parameters' names as the framework gives them (model::GradientTensor::parameter),
  // backward order: BytePS declares its keys in their sorted order.
  std::vector<std::string> gradient_names;
  // A small allreduce of `bytes` across the job with the fastest protocol (the coordination
  // messages of Horovod's negotiation).
  std::function<Seconds(Bytes)> small_allreduce;
  // A binomial-tree broadcast of `bytes` from rank 0 over the job (MPI's, for messages this
  // small): the rounds of Horovod's negotiation through rank 0.
  std::function<Seconds(Bytes)> small_broadcast;
};

// One step's gradient exchange as the framework runs it: told when each tensor is ready on every
// rank, it answers with the groups that start now. Stateful, one per step.
class GradientLauncher {
 public:
  virtual ~GradientLauncher() = default;
  // Tensor `t` (backward order) has been produced by every rank at `now`.
  virtual std::vector<CommGroup> ready(int t, Time now) = 0;
  // Periodic policies (Horovod's background cycle): the first tick after `now`.
  virtual std::optional<Time> next_tick(Time /*now*/) const { return std::nullopt; }
  virtual std::vector<CommGroup> tick(Time /*now*/) { return {}; }
};

// What the user chose, resolved: the collective algorithm and the parameter-server layout.
struct ResolvedPolicy {
  std::string strategy;     // a collective algorithm (networks::collective_algorithms())
  networks::PsOptions ps;   // servers for the ps strategy
  FrameworkOptions params;  // the policy's settings, defaults filled in
  std::string description;  // the settings in words, for the output's "why"
  std::map<std::string, std::string> settings;  // name -> value with unit, for JSON
  // Set, to the reason in words, where the framework's runtime holds every exchange until the
  // backward pass is over, overlap or not (docs/simulator.md, "TensorFlow's GPU replicas").
  std::optional<std::string> after_backward;
  // The fp16 compression casts each gradient tensor on its own (the optimizer wrappers of
  // Horovod and BytePS), not a bucket at a time (DDP's communication hook).
  bool compress_per_tensor = false;
};

class FrameworkPolicy {
 public:
  virtual ~FrameworkPolicy() = default;
  // Checks the options against the job; throws InputError naming the flag.
  virtual ResolvedPolicy resolve(const FrameworkOptions& options,
                                 const std::optional<std::string>& strategy,
                                 const JobInfo& job) const = 0;
  virtual std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& policy,
                                                     const JobInfo& job) const = 0;
  // Bytes of fusion or bucket buffers a GPU holds.
  virtual Bytes buffer_bytes(const ResolvedPolicy& policy, const JobInfo& job) const = 0;
};

using FrameworkRegistry = Registry<FrameworkPolicy>;
const FrameworkRegistry& framework_policies();

// Registration, one function per policy source file.
void register_horovod(FrameworkRegistry& r);
void register_pytorch_ddp(FrameworkRegistry& r);
void register_tensorflow(FrameworkRegistry& r);
void register_mxnet(FrameworkRegistry& r);
void register_byteps(FrameworkRegistry& r);

// Shared by policies: one group per tensor, started as soon as that tensor is ready
// (frameworks that exchange each variable on its own).
class PerTensorLauncher : public GradientLauncher {
 public:
  explicit PerTensorLauncher(std::vector<CommGroup> groups) : groups_(std::move(groups)) {}
  std::vector<CommGroup> ready(int t, Time) override {
    return {groups_[static_cast<std::size_t>(t)]};
  }

 private:
  std::vector<CommGroup> groups_;
};

// Shared by policies: the parameter-server layout the options ask for, colocated on the CPU by
// default, with `servers` unless --ps-servers is given.
networks::PsOptions ps_options(const FrameworkOptions& o, int servers);

// Shared by the policies whose exchange runs as TensorFlow custom ops (horovod, keras, byteps):
// under XLA auto-clustering (`options.xla`) every exchange waits for the backward pass.
void apply_xla(const FrameworkOptions& options, const std::string& framework, ResolvedPolicy& p);
// --compression (none | fp16): records it in `p`'s settings and description; `per_tensor` for the
// optimizer wrappers that take Horovod's Compression (each gradient cast on its own), false for
// DDP's fp16_compress_hook (a bucket at a time).
void apply_compression(const FrameworkOptions& options, ResolvedPolicy& p, bool per_tensor);
// Whether a resolved policy casts the gradients to fp16 for the exchange.
bool compresses_fp16(const ResolvedPolicy& p);

// The options only some frameworks read (fusion_threshold, cycle_time, negotiation,
// cache_capacity, compression, bucket_cap, first_bucket, partition, mode, xla, host_staging,
// ps_device), by field, each with whether it is given.
std::vector<std::pair<std::string_view, bool>> settings_given(const FrameworkOptions& o);
// Shared by policies: rejects an option (its field, e.g. "bucket_cap") the policy does not take.
void refuse(bool given, const std::string& field, const std::string& framework);
// The same for every option of settings_given: each one given that is not in `takes` is
// refused.
void refuse_unless_taken(const FrameworkOptions& o, std::initializer_list<std::string_view> takes,
                         const std::string& framework);

// BytePS's default key hash (BytePSGlobal::Hash_DJB2, byteps/common/global.cc): djb2 over the
// key's decimal digits, h = 33 h + c from h = 5381, modulo 2^64. A key goes to server
// hash mod k; for k = 2, 4, 8 or 16 that is (5381 + the digits' sum) mod k.
std::uint64_t byteps_key_hash(std::uint64_t key);

}  // namespace dlsim::simulator
