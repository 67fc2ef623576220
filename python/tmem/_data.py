"""tmem.utils.data: torch.utils.data's Dataset, TensorDataset, Subset,
random_split, default_collate and DataLoader, for tmem tensors, in one
process (num_workers is accepted and the batches are made in the calling
process: tmem's ops already use every core). DataLoader follows torch's
order of events: a sampler (RandomSampler when shuffle, drawing from the
generator given or tmem's default one; SequentialSampler otherwise)
yields indices, batches of batch_size are made of them (the last dropped
when drop_last and short), and collate_fn (default_collate) stacks each
batch's samples."""
import collections.abc as _abc
import numbers as _numbers
import types as _types

from . import _tmem


class Dataset:
    """A map-style dataset: __getitem__(i) for i in [0, len) (torch.utils.data.Dataset)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read by iterating it (torch.utils.data.IterableDataset):
    subclasses define __iter__; DataLoader batches what it yields in
    order (no sampler, no shuffle)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset):
    """Samples are tuples of the tensors' rows: tensors [N, ...] of one N (torch's). ValueError for another N."""

    def __init__(self, *tensors):
        if not tensors or not all(isinstance(t, _tmem.Tensor) and t.dim() > 0 for t in tensors):
            raise ValueError("TensorDataset: expected one or more tensors of at least 1 dim")
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError(f"TensorDataset: the tensors' first dims differ: {[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The datasets one after another (torch.utils.data.ConcatDataset)."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: expected at least one dataset")
        self.cumulative_sizes, total = [], 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1] if self.cumulative_sizes else 0

    def __getitem__(self, index):
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"ConcatDataset: index {index} is out of range for {len(self)} samples")
        for d, end in zip(self.datasets, self.cumulative_sizes):
            if index < end:
                return d[index - (end - len(d))]


class Subset(Dataset):
    """The samples of dataset at indices (torch.utils.data.Subset)."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def _permutation(n, generator):
    """A random permutation of range(n) from generator (tmem's default when None)."""
    if n == 0:
        return []
    keys = _tmem.rand(n, dtype=_tmem.float64, generator=generator)
    return keys.numpy().argsort(kind="stable").tolist()


def random_split(dataset, lengths, generator=None):
    """Subsets of dataset of the given lengths, or fractions summing to 1
    (torch's: the remainder goes one by one to the first subsets), over a
    random permutation. ValueError when the lengths do not add up."""
    n = len(dataset)
    lengths = [int(x) if isinstance(x, _numbers.Integral) else x for x in lengths]
    fractions = any(isinstance(x, float) for x in lengths)
    if fractions and all(isinstance(x, (int, float)) and 0 <= x <= 1 for x in lengths) and \
            abs(sum(lengths) - 1) < 1e-9:
        counts = [int(x * n) for x in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n or any(not isinstance(x, int) or x < 0 for x in lengths):
        raise ValueError(f"random_split: the lengths {lengths} do not add up to the {n} samples of the dataset")
    order, out, start = _permutation(n, generator), [], 0
    for length in lengths:
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out


def default_collate(batch):
    """Samples stacked as torch's default_collate does: tensors stacked
    along a new first dim; ints as an int64 tensor, floats as a float64
    one (torch's types); strings left as a list; tuples, lists and dicts
    collated element by element. TypeError for samples it cannot stack."""
    first = batch[0]
    if isinstance(first, _tmem.Tensor):
        return _tmem.stack(list(batch), 0)
    if isinstance(first, bool) or isinstance(first, _numbers.Integral):
        if all(isinstance(x, _numbers.Integral) for x in batch):
            return _tmem.tensor(list(batch), dtype=_tmem.int64)
        return _tmem.tensor(list(batch))  # ints then floats: float32, as torch.tensor of them
    if isinstance(first, _numbers.Real):
        return _tmem.tensor(list(batch), dtype=_tmem.float64)
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, _abc.Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(default_collate(list(items)) for items in zip(*batch)))
    if isinstance(first, _abc.Sequence):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("default_collate: each element in the batch should be of equal size")
        return [default_collate(list(items)) for items in zip(*batch)]
    try:
        import numpy as np
        if isinstance(first, np.ndarray):
            return _tmem.stack([_tmem.tensor(a) for a in batch], 0)
    except ImportError:
        pass
    raise TypeError(f"default_collate: batch must contain tensors, numbers, strings, dicts or lists; found "
                    f"{type(first).__name__}")


class DataLoader:
    """Batches of a dataset (torch.utils.data.DataLoader): iterating gives
    collate_fn(samples) per batch of batch_size indices (shuffled each epoch
    from generator when shuffle), the last dropped when drop_last and
    short; batch_size None gives the samples one by one. num_workers,
    pin_memory and persistent_workers are accepted; the batches are made in
    this process. ValueError for a batch_size below 1 or shuffle with a
    sampler."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 generator=None, prefetch_factor=2, persistent_workers=False):
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"DataLoader: batch_size must be an int >= 1 or None, but got {batch_size!r}")
        if batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                             "sampler, and drop_last")
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, but got {num_workers!r}")
        self.dataset, self.batch_size, self.drop_last, self.generator = dataset, batch_size, drop_last, generator
        self.num_workers = num_workers
        if isinstance(dataset, IterableDataset):
            if shuffle or sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader: an IterableDataset is read in its own order; it takes no shuffle, "
                                 "sampler or batch_sampler")
            self.sampler = self.batch_sampler = None
            self.collate_fn = collate_fn if collate_fn is not None else (default_collate if batch_size is not None
                                                                         else _convert)
            return
        self.sampler = sampler if sampler is not None else (
            RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset))
        self.batch_sampler = batch_sampler if batch_sampler is not None else (
            BatchSampler(self.sampler, batch_size, drop_last) if batch_size is not None else None)
        if batch_sampler is not None:
            self.batch_size, self.drop_last = None, False
        self.collate_fn = collate_fn if collate_fn is not None else (default_collate if self.batch_sampler
                                                                     is not None else _convert)

    def __iter__(self):
        if isinstance(self.dataset, IterableDataset):
            yield from self._iterate_stream()
            return
        if self.batch_sampler is None:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[i] for i in indices])

    def _iterate_stream(self):
        """The batches of an IterableDataset: batch_size samples at a time
        as they come (one by one for batch_size None), the short last one
        dropped when drop_last."""
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            raise TypeError("DataLoader: an IterableDataset has no len()")
        return len(self.batch_sampler) if self.batch_sampler is not None else len(self.sampler)


def _convert(sample):
    """A sample as DataLoader(batch_size=None) gives it (torch's default_convert: unchanged for tmem tensors)."""
    return sample


class SequentialSampler:
    """The indices 0 .. len(data_source) - 1 in order."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler:
    """The indices in a new random order each pass, from generator (tmem's default when None)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if replacement:
            raise ValueError("RandomSampler: replacement=True is not supported by tmem")
        self.data_source, self.generator = data_source, generator
        self.num_samples = len(data_source) if num_samples is None else num_samples
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or self.num_samples < 0:
            raise ValueError(f"RandomSampler: num_samples must be an int >= 0, but got {self.num_samples!r}")
        if self.num_samples and not len(data_source):
            raise ValueError(f"RandomSampler: cannot draw {self.num_samples} samples from an empty data source")

    def __iter__(self):
        n = len(self.data_source)
        order = []
        while len(order) < self.num_samples:
            order += _permutation(n, self.generator)
        return iter(order[:self.num_samples])

    def __len__(self):
        return self.num_samples


class BatchSampler:
    """Lists of batch_size indices from sampler, the last dropped when drop_last and short."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"BatchSampler: batch_size must be an int >= 1, but got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last must be a bool, but got {drop_last!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


data = _types.ModuleType("tmem.utils.data", __doc__)
for _obj in (Dataset, IterableDataset, TensorDataset, ConcatDataset, Subset, random_split, default_collate, DataLoader,
             SequentialSampler, RandomSampler, BatchSampler):
    setattr(data, _obj.__name__, _obj)
utils = _types.ModuleType("tmem.utils", "torch.utils's data loading for tmem (tmem.utils.data).")
utils.data = data
