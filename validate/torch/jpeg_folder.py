"""A folder of JPEG images as a training set, read the way torchvision's ImageNet examples read
it: PIL decodes each file, RandomResizedCrop(224), RandomHorizontalFlip, ToTensor and Normalize
with ImageNet's mean and deviation, in DataLoader worker processes. Every image has label 0
(the step's cost does not depend on the labels). Used by input_rate.py (the loaders alone) and
ddp_step.py --data (training on them); docs/validate.md, "The input pipeline on this machine".
"""

import os

import torch
import torchvision.transforms as T
from PIL import Image

EXTENSIONS = (".jpg", ".jpeg")


def image_files(folder):
    """Every JPEG under `folder` (.jpg or .jpeg in any case), sorted; raises ValueError naming
    the folder if it is not one or holds none."""
    if not os.path.isdir(folder):
        raise ValueError(f"{folder}: not a folder")
    files = []
    for root, _, names in os.walk(folder):
        files.extend(os.path.join(root, n) for n in names if n.lower().endswith(EXTENSIONS))
    if not files:
        raise ValueError(f"{folder}: no JPEG files (.jpg, .jpeg) under it")
    return sorted(files)


class JpegFolder(torch.utils.data.Dataset):
    def __init__(self, folder, side=224):
        self.files = image_files(folder)
        self.transform = T.Compose([
            T.RandomResizedCrop(side),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with Image.open(self.files[i]) as im:
            return self.transform(im.convert("RGB")), 0


def loader(folder, batch, workers, seed, side=224):
    """A shuffling DataLoader over `folder` that cycles: batches of `batch`, `workers` worker
    processes (PyTorch's default prefetch of 2 batches each), the last partial batch dropped."""
    data = JpegFolder(folder, side)
    if len(data) < batch:
        raise ValueError(f"{folder}: {len(data)} images, fewer than a batch of {batch}")
    g = torch.Generator()
    g.manual_seed(seed)
    dl = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers,
                                     drop_last=True, generator=g,
                                     persistent_workers=workers > 0)

    def forever():
        while True:
            yield from dl
    return forever()
