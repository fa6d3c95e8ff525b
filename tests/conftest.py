"""Suite-wide settings: one torch thread.

The tests run tiny models whose ops are far too small to split across threads; on a 2-core machine idle OpenMP
threads spinning next to the work made whole files several times slower. One thread is faster and deterministic.
"""

import torch

torch.set_num_threads(1)
