# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark the nvidia-smi -q -x parser on the 8-GPU B200 capture (not a test; goal: under 30 ms a parse).

Usage: python3 bench/bench_nvsmi.py [-n RUNS] [--no-supported-clocks] [FILE]
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import argparse
import importlib.util
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.join(ROOT, 'tests', 'fixtures', 'nvidia-smi-xml', 'b200-8gpu_k8s-test-infra.xml')
GOAL_MS = 30.0


def load_parser():
    # The parser has no Ansible import, so it can be loaded straight from its file.
    path = os.path.join(ROOT, 'plugins', 'module_utils', 'parsers', '_nvidia_smi_xml.py')
    spec = importlib.util.spec_from_file_location('_nvsmi', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('file', nargs='?', default=DEFAULT)
    parser.add_argument('-n', '--runs', type=int, default=200)
    parser.add_argument('--no-supported-clocks', action='store_true')
    args = parser.parse_args()
    nvsmi = load_parser()
    with open(args.file) as handle:
        text = handle.read()
    include = not args.no_supported_clocks
    nvsmi.parse_nvsmi_xml(text, include_supported_clocks=include)  # warm up
    times = []
    for dummy in range(args.runs):
        start = time.perf_counter()
        facts = nvsmi.parse_nvsmi_xml(text, include_supported_clocks=include)
        times.append((time.perf_counter() - start) * 1000.0)
    mean, median = statistics.mean(times), statistics.median(times)
    print('file: {0} ({1} bytes, {2} GPUs)'.format(os.path.basename(args.file), len(text), len(facts['gpus'])))
    print('runs: {0}, supported clocks: {1}'.format(args.runs, 'yes' if include else 'no'))
    print('mean: {0:.2f} ms  median: {1:.2f} ms  min: {2:.2f} ms  max: {3:.2f} ms'.format(
        mean, median, min(times), max(times)))
    print('goal: < {0:.0f} ms: {1}'.format(GOAL_MS, 'met' if median < GOAL_MS else 'NOT met'))
    return 0 if median < GOAL_MS else 1


if __name__ == '__main__':
    sys.exit(main())
