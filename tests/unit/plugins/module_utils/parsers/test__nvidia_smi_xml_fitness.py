# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugins/module_utils/_nvsmi.py: the reads the fitness checks stand on (PCIe link, clock event reasons and their
counters, remapped rows, MIG mode, VBIOS), on the real captures of tests/fixtures/nvidia-smi-xml.  Expected values
were read from the files by hand (grep); the inputs this file changes are labelled "constructed from"."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import NvidiaSmiParseError, parse_nvsmi_xml

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES

XML_DIR = os.path.join(FIXTURES, 'nvidia-smi-xml')


def load(name):
    with open(os.path.join(XML_DIR, name)) as handle:
        return handle.read()


# (capture, GPU position, gen current, gen max, width current, width max, replay counter, gpu_idle active)
PCIE_TABLE = [
    # data-centre boards idle at their full generation and width
    ('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml', 0, 5, 5, 16, 16, 150, True),
    ('b200-8gpu_k8s-test-infra.xml', 0, 5, 5, 16, 16, 0, True),
    ('gb300-4gpu_k8s-test-infra.xml', 0, 6, 6, 16, 16, 0, True),
    # idle consumer/workstation GPUs at generation 1 with the full width: power saving (nvidia-smi --help-query-gpu)
    ('rtx-3060-1gpu_telegraf.xml', 0, 1, 4, 16, 16, 0, True),
    ('rtx-a5000-2gpu_telegraf.xml', 0, 1, 4, 16, 16, 0, True),
    # a slot wired x8: the link trained at x8 at the full generation (AWS g6e)
    ('l40s-1gpu_k8s-test-infra.xml', 0, 4, 4, 8, 16, 0, True),
    # idle at generation 1 and x8 (AWS g5, A10G)
    ('a10g-1gpu_telegraf.xml', 0, 1, 4, 8, 16, 0, True),
]


@pytest.mark.parametrize('name, position, gen, gen_max, width, width_max, replay, idle', PCIE_TABLE)
def test_pcie_link(name, position, gen, gen_max, width, width_max, replay, idle):
    gpu = parse_nvsmi_xml(load(name))['gpus'][position]
    link = gpu['pcie']
    assert (link['gen_current'], link['gen_max'], link['width_current'], link['width_max'],
            link['replay_counter']) == (gen, gen_max, width, width_max, replay)
    assert gpu['clocks_event_reasons']['gpu_idle'] is idle


def test_pcie_device_and_host_generations():
    # GB200: the GPU can do Gen6, the link to the Grace CPU is Gen5 (max_link_gen 5, max_device_link_gen 6)
    link = parse_nvsmi_xml(load('gb200-4gpu-arm64_k8s-test-infra.xml'))['gpus'][0]['pcie']
    assert (link['gen_current'], link['gen_max'], link['gen_device_current'], link['gen_device_max'],
            link['gen_host_max']) == (5, 5, 5, 6, None)
    # an older schema (418, no DOCTYPE) has no device/host generations
    link = parse_nvsmi_xml(load('gtx-1660ti-1gpu_telegraf.xml'))['gpus'][0]['pcie']
    assert (link['gen_current'], link['gen_max'], link['gen_device_max']) == (1, 3, None)


def test_k80_gpus_idle_at_different_generations():
    gpus = parse_nvsmi_xml(load('tesla-k80-4gpu_pai.xml'))['gpus']
    assert sorted(set(g['pcie']['gen_current'] for g in gpus)) == [1, 3]


def test_event_reasons_and_counters():
    # a real sw_power_cap Active (RTX 3090, v13): a software cap, not a slowdown
    gpu = parse_nvsmi_xml(load('rtx-3090-1gpu-v13_telegraf.xml'))['gpus'][0]
    reasons = gpu['clocks_event_reasons']
    assert reasons['sw_power_cap'] is True
    assert [k for k, v in sorted(reasons.items()) if v] == ['sw_power_cap']
    assert gpu['clocks_event_reasons_counters_us']['sw_power_cap'] == 9840338777
    # H100 (v13): everything idle, the counters since load
    gpu = parse_nvsmi_xml(load('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml'))['gpus'][0]
    assert gpu['clocks_event_reasons']['hw_slowdown'] is False
    assert gpu['clocks_event_reasons']['hw_thermal_slowdown'] is False
    assert gpu['clocks_event_reasons']['hw_power_brake_slowdown'] is False
    assert gpu['clocks_event_reasons_counters_us'] == {
        'sw_power_cap': 7015662857, 'sync_boost': 0, 'sw_therm_slowdown': 0, 'hw_therm_slowdown': 0, 'hw_power_brake': 0}
    # v12 (570.148.08) has no counters element
    assert parse_nvsmi_xml(load('a100-sxm4-40gb-1gpu_k8s-test-infra.xml'))['gpus'][0][
        'clocks_event_reasons_counters_us'] is None


def test_hw_slowdown_and_power_brake_constructed_from_the_h100_capture():
    """No public XML capture with a hardware slowdown was found; the text form is public (a V100 SXM2 in a Dell
    C4130: HW Slowdown and HW Power Brake Slowdown Active, tests/testbed/gpu_double/REALITY.md).  Constructed from the
    H100 capture by flipping those two elements of GPU 0."""
    text = load('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml')
    for tag in ('clocks_event_reason_hw_slowdown', 'clocks_event_reason_hw_power_brake_slowdown'):
        text = text.replace('<{0}>Not Active</{0}>'.format(tag), '<{0}>Active</{0}>'.format(tag), 1)
    gpus = parse_nvsmi_xml(text)['gpus']
    assert gpus[0]['clocks_event_reasons']['hw_slowdown'] is True
    assert gpus[0]['clocks_event_reasons']['hw_power_brake_slowdown'] is True
    assert gpus[0]['clocks_event_reasons']['hw_thermal_slowdown'] is False
    assert gpus[1]['clocks_event_reasons']['hw_slowdown'] is False


def test_remapped_rows_pending_constructed_from_the_b200_capture():
    """No public XML capture with a pending remap was found (leptonai/gpud PR #80 quotes the text form:
    "Pending : Yes" with 4 uncorrectable rows).  Constructed from the B200 capture, GPU 0."""
    text = load('b200-8gpu_k8s-test-infra.xml')
    text = text.replace('<remapped_row_unc>0</remapped_row_unc>', '<remapped_row_unc>4</remapped_row_unc>', 1)
    text = text.replace('<remapped_row_pending>No</remapped_row_pending>',
                        '<remapped_row_pending>Yes</remapped_row_pending>', 1)
    gpus = parse_nvsmi_xml(text)['gpus']
    assert gpus[0]['remapped_rows'] == {'pending': True, 'failure': False, 'correctable': 0, 'uncorrectable': 4}
    assert gpus[1]['remapped_rows']['pending'] is False


def test_mig_modes_and_vbios():
    # real: MIG on (A100, telegraf)
    gpu = parse_nvsmi_xml(load('a100-sxm4-1gpu_telegraf.xml'))['gpus'][0]
    assert (gpu['mig_mode'], gpu['mig_pending']) == ('Enabled', 'Enabled')
    # real: MIG off on every H100 of the board, one VBIOS for all eight
    gpus = parse_nvsmi_xml(load('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml'))['gpus']
    assert set((g['mig_mode'], g['mig_pending']) for g in gpus) == {('Disabled', 'Disabled')}
    assert set(g['vbios_version'] for g in gpus) == {'96.00.99.00.01'}
    # constructed from the H100 capture: a MIG change waiting for a reset on GPU 3
    text = load('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml')
    blocks = text.split('<gpu id=')
    blocks[4] = blocks[4].replace('<pending_mig>Disabled</pending_mig>', '<pending_mig>Enabled</pending_mig>', 1)
    gpu = parse_nvsmi_xml('<gpu id='.join(blocks))['gpus'][3]
    assert (gpu['mig_mode'], gpu['mig_pending']) == ('Disabled', 'Enabled')


def test_bad_width_names_the_element():
    good = '<current_link_width>16x</current_link_width>'
    text = load('b200-8gpu_k8s-test-infra.xml').replace(good, '<current_link_width>sixteen</current_link_width>', 1)
    # a status word is "no value", a number in another unit is an error naming the element
    assert parse_nvsmi_xml(text)['gpus'][0]['pcie']['width_current'] is None
    text = load('b200-8gpu_k8s-test-infra.xml').replace(good, '<current_link_width>16 lanes</current_link_width>', 1)
    with pytest.raises(NvidiaSmiParseError) as err:
        parse_nvsmi_xml(text)
    assert str(err.value) == ("GPU 0 (00000000:8F:00.0) <pci/pci_gpu_link_info/link_widths/current_link_width>: "
                              "expected a number in x, got '16 lanes'")
