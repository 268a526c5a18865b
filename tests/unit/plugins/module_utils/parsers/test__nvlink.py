# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/parsers/_nvlink.py on the real captures of tests/fixtures/nvlink (SOURCES.md).  Expected
values were read from the files by eye; inputs built here are labelled "constructed"."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _nvlink as N

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

DIR = os.path.join(FIXTURES, 'nvlink')


def read(name):
    with open(os.path.join(DIR, name)) as handle:
        return handle.read()


# (capture, [(index, name, links listed, active, inactive, all_inactive)], speed of the active links)
STATUS_TABLE = [
    ('h100-sxm-1gpu-drv590.48.01_nvlink-s_nvidia_gpu_exporter.txt',
     [(0, 'NVIDIA H100 80GB HBM3', 18, 18, 0, False)], 26.562),
    ('a100-sxm4-80gb-1gpu_nvlink-s_azurehpc-health-checks.txt',
     [(7, 'NVIDIA A100-SXM4-80GB', 12, 12, 0, False)], 25.0),
    ('a100-sxm4-80gb-1gpu_nvlink-s-all-inactive_azurehpc-health-checks.txt',
     [(6, 'NVIDIA A100-SXM4-80GB', 0, 0, 0, True)], None),
    ('a100-sxm4-80gb-8gpu_nvlink-s_gpud.txt',
     [(i, 'NVIDIA A100-SXM4-80GB', 12, 12, 0, False) for i in range(8)], 25.0),
    ('h100-pcie-2gpu-drv555.42.02_nvlink-s-bridge_hpe-e-learning.txt',
     [(0, 'NVIDIA H100 PCIe', 18, 12, 6, False), (1, 'NVIDIA H100 PCIe', 18, 12, 6, False)], 26.562),
    ('a100-pcie-2gpu-drv555.42.02_nvlink-s-no-nvlink_hpe-e-learning.txt',
     [(0, 'NVIDIA A100-PCIE-40GB', 0, 0, 0, True), (1, 'NVIDIA A100-PCIE-40GB', 0, 0, 0, True)], None),
    ('a10-1gpu_nvlink-s-empty_gpud.txt', [], None),
]


def test_status_table_covers_every_status_capture():
    names = sorted(n for n in os.listdir(DIR) if '_nvlink-s' in n)
    assert names == sorted(row[0] for row in STATUS_TABLE)


@pytest.mark.parametrize('name, gpus, speed', STATUS_TABLE)
def test_status_captures(name, gpus, speed):
    parsed = N.parse_nvlink_status(read(name))
    got = [(g['index'], g['name'], len(g['links']), g['active'], g['inactive'], g['all_inactive'])
           for g in parsed['gpus']]
    assert got == gpus
    speeds = set(link['speed_gbps'] for g in parsed['gpus'] for link in g['links'] if link['active'])
    assert speeds == (set() if speed is None else {speed})


def test_status_links_in_order_with_uuid():
    gpu = N.parse_nvlink_status(read('h100-sxm-1gpu-drv590.48.01_nvlink-s_nvidia_gpu_exporter.txt'))['gpus'][0]
    assert [link['link'] for link in gpu['links']] == list(range(18))
    assert gpu['uuid'] == 'GPU-00000000-0000-0000-0000-000000000000'


def test_status_bridged_pcie_pair_names_the_inactive_links():
    # an NVLink-bridged H100 PCIe pair: links 4, 5, 10, 11, 16, 17 are down on a healthy pair (by design)
    gpu = N.parse_nvlink_status(read('h100-pcie-2gpu-drv555.42.02_nvlink-s-bridge_hpe-e-learning.txt'))['gpus'][1]
    assert [link['link'] for link in gpu['links'] if not link['active']] == [4, 5, 10, 11, 16, 17]
    assert gpu['uuid'] == 'GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3'


def test_status_bytes():
    text = read('a100-sxm4-80gb-1gpu_nvlink-s_azurehpc-health-checks.txt').encode('utf-8')
    assert N.parse_nvlink_status(text)['gpus'][0]['active'] == 12


@pytest.mark.parametrize('text, message', [
    # constructed inputs: each breaks one rule of the format
    ('\t Link 0: 25 GB/s\n', 'line 1 \'\\t Link 0: 25 GB/s\': expected a "GPU <n>: <name> (UUID: ...)" line'),
    ('GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n\t Link 0: twenty GB/s\n',
     "line 2 '\\t Link 0: twenty GB/s': expected \"Link <n>: <speed> GB/s\""),
    ('GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 0: 26.562 GB/s\n',
     'GPU 0: a link is listed twice (0, 0)'),
    ('GPU 0: NVIDIA A100 (UUID: GPU-x)\n\t Link 0: 25 GB/s\n'
     'NVML: Unable to retrieve NVLink information as all links are inactive\n',
     'GPU 0 already listed links before NVML said all are inactive'),
    ('No devices were found\n', "line 1 'No devices were found': expected a \"GPU <n>"),
])
def test_status_errors_name_the_line(text, message):
    with pytest.raises(N.NvlinkParseError) as err:
        N.parse_nvlink_status(text)
    assert message in str(err.value)


def test_errors_capture_with_its_elision():
    """The ml-engineering copy of `nvlink -e` on an H100 elides links 2-16 with a "[...]" line of the author's: the
    parser names that line; without it (dropped here, the capture stays as published) links 0, 1 and 17 parse."""
    text = read('h100-sxm_nvlink-e-excerpt_ml-engineering.txt')
    with pytest.raises(N.NvlinkParseError) as err:
        N.parse_nvlink_errors(text)
    assert str(err.value) == ('line 10 \'         [...]\': expected "Link <n>: <counter name>: <count>"')
    parsed = N.parse_nvlink_errors('\n'.join(line for line in text.splitlines() if line.strip() != '[...]'))
    gpu = parsed['gpus'][0]
    assert (gpu['index'], gpu['name']) == (0, 'NVIDIA H100 80GB HBM3')
    assert sorted(gpu['links']) == [0, 1, 17]
    assert gpu['links'][17] == {'Replay Errors': 0, 'Recovery Errors': 0, 'CRC Errors': 0}
    assert N.counter_total(gpu) == 0


def test_errors_counts_and_na():
    # constructed: the H100 layout with non-zero and N/A counts, and a counter name of NVLink 5
    text = ('GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n'
            '\t Link 0: Replay Errors: 3\n\t Link 0: Recovery Errors: 1\n\t Link 0: CRC Errors: N/A\n\n'
            '\t Link 1: Replay Errors: 0\n\t Link 1: Recovery Errors: 0\n\t Link 1: CRC Errors: 12\n'
            'GPU 1: NVIDIA B200 (UUID: GPU-b)\n\t Link 0: Malformed packet Errors: 2\n')
    parsed = N.parse_nvlink_errors(text)
    first, second = parsed['gpus']
    assert first['links'][0] == {'Replay Errors': 3, 'Recovery Errors': 1, 'CRC Errors': None}
    assert N.counter_total(first) == 16
    assert N.counter_total(first, names=('CRC Errors',)) == 12
    assert second['links'] == {0: {'Malformed packet Errors': 2}}


@pytest.mark.parametrize('text, message', [
    ('\t Link 0: CRC Errors: 0\n', 'expected a "GPU <n>: <name> (UUID: ...)" line before any counter line'),
    ('GPU 0: x (UUID: y)\n\t Link 0: CRC Errors: many\n', "line 2 '\\t Link 0: CRC Errors: many'"),
    ('GPU 0: x (UUID: y)\n\t Link 0: CRC Errors: 0\n\t Link 0: CRC Errors: 1\n',
     "GPU 0 link 0: counter 'CRC Errors' is listed twice"),
])
def test_errors_errors_name_the_line(text, message):
    with pytest.raises(N.NvlinkParseError) as err:
        N.parse_nvlink_errors(text)
    assert message in str(err.value)
