// Intra-op thread count (libtorch at::set_num_threads / get_num_threads) and
// denormal flushing (torch.set_flush_denormal). The CPU kernels parallelise
// with OpenMP, so these act on its threads.
#pragma once

namespace tmem {

/// The most threads set_num_threads and the commands' --threads take: far
/// past any machine's cores, and below the counts at which libgomp fails to
/// start its threads (or crashes under a memory limit).
inline constexpr int kMaxThreads = 1024;

/// Sets the number of threads the CPU kernels use from now on (OpenMP
/// omp_set_num_threads; it applies to the calling thread and to threads it
/// starts afterwards). Throws ValueError for n outside [1, kMaxThreads].
void set_num_threads(int n);
/// The number of threads the next parallel CPU kernel will use
/// (omp_get_max_threads).
int get_num_threads();
/// With on, the CPU treats denormal floats (below 1.18e-38 in float32,
/// 2.2e-308 in float64) as 0, as inputs and as results (x86's FTZ and DAZ
/// modes, as torch.set_flush_denormal(True)); off restores IEEE gradual
/// underflow. Denormal arithmetic is tens of times slower on x86: the tiny
/// gradients of Gaussian writes far from a token, carried through the
/// ConvLSTM3D's forget gate, made convlstm3d_cell's backward 21x slower on
/// an 8^3 grid (docs/DESIGN.md §5). Applies to the calling thread and,
/// with pool, to the threads of its OpenMP pool (set in a parallel region of
/// get_num_threads() threads, which starts the pool if none is running).
/// Threads started later inherit the mode of the thread that starts them, so
/// a program calling this before its first parallel region can pass pool =
/// false (the tmem command does, before --threads is known).
/// Returns false, changing nothing, on a CPU without these modes (builds for
/// other than x86-64). The tmem command turns it on; the library and the
/// Python module leave it off until called.
bool set_flush_denormal(bool on, bool pool = true);

}  // namespace tmem
