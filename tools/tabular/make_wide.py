#!/usr/bin/env python3
"""Writes the wide tabular sets of the README ("Wider sets") as CSV files
(label, features) into DIR, deterministically, from Debian's Fashion-MNIST
and Python's seeded random: no other package.

  fmnist2k         2,000 Fashion-MNIST training images (784 pixels)
  fmnist2k_noise   the same + 200 features of noise N(0, (3 sd)^2)
  synth150         1,500 items, 150 features: 4 classes in 10, varied scales
  synth300_latent  2,000 items, 300 features: 5 classes in 12, 288 driven by 6 latent factors
  d110_n400        400 items, 110 features: 4 classes in 15
  d2000_n200       200 items, 2,000 features: 2 classes in 30 (fewer items than features)

Usage: tools/tabular/make_wide.py DIR   (then tools/tabular/eval.sh DIR)"""
import gzip
import math
import os
import random
import struct
import sys

FMNIST = '/usr/share/datasets/fashion-mnist'


def idx(path):
    b = gzip.open(path).read()
    if struct.unpack('>I', b[:4])[0] == 2051:
        n, r, c = struct.unpack('>III', b[4:16])
        return n, r * c, b[16:]
    return struct.unpack('>I', b[4:8])[0], 1, b[8:]


def fashion(out):
    random.seed(7)
    n, d, img = idx(FMNIST + '/train-images-idx3-ubyte.gz')
    _, _, lab = idx(FMNIST + '/train-labels-idx1-ubyte.gz')
    sel = random.sample(range(n), 2000)
    pix = [[img[i * d + j] for j in range(d)] for i in sel]
    sd = math.sqrt(sum((v - 72.9) ** 2 for r in pix[:200] for v in r) / (200 * d))
    with open(os.path.join(out, 'fmnist2k.csv'), 'w') as f:
        for i, r in zip(sel, pix):
            f.write('c%d,' % lab[i] + ','.join(map(str, r)) + '\n')
    with open(os.path.join(out, 'fmnist2k_noise.csv'), 'w') as f:
        for i, r in zip(sel, pix):
            noise = ','.join('%.1f' % random.gauss(0, 3 * sd) for _ in range(200))
            f.write('c%d,' % lab[i] + ','.join(map(str, r)) + ',' + noise + '\n')
    # Informative features shifted by class, the rest driven by latent
    # factors (none: independent), every feature on its own scale.
    def latent(fn, n, d, k, inf, nlat):
        means = [[random.gauss(0, 1.0) for _ in range(inf)] for _ in range(k)]
        load = [[random.gauss(0, 1) for _ in range(nlat)] for _ in range(d - inf)]
        scales = [math.exp(random.uniform(-2, 2)) for _ in range(d)]
        with open(os.path.join(out, fn), 'w') as f:
            for _ in range(n):
                c = random.randrange(k)
                x = [means[c][j] + random.gauss(0, 1) for j in range(inf)]
                z = [random.gauss(0, 1) for _ in range(nlat)]
                x += [sum(a * b for a, b in zip(load[j], z)) + random.gauss(0, 1)
                      for j in range(d - inf)]
                f.write('k%d,' % c + ','.join('%.4f' % (v * s) for v, s in zip(x, scales)) + '\n')
    latent('synth150.csv', 1500, 150, 4, 10, 0)
    latent('synth300_latent.csv', 2000, 300, 5, 12, 6)


def few_items(out):
    random.seed(11)
    def synth(fn, n, d, k, inf, sep):
        means = [[random.gauss(0, sep) for _ in range(inf)] for _ in range(k)]
        sc = [math.exp(random.uniform(-1, 1)) for _ in range(d)]
        with open(os.path.join(out, fn), 'w') as f:
            for _ in range(n):
                c = random.randrange(k)
                x = [means[c][j] + random.gauss(0, 1) for j in range(inf)]
                x += [random.gauss(0, 1) for _ in range(d - inf)]
                f.write('k%d,' % c + ','.join('%.4f' % (v * s) for v, s in zip(x, sc)) + '\n')
    synth('d110_n400.csv', 400, 110, 4, 15, 0.9)
    synth('d2000_n200.csv', 200, 2000, 2, 30, 0.8)


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    fashion(sys.argv[1])
    few_items(sys.argv[1])
