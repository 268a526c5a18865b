# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU health rules of plugins/module_utils/rules/_gpu_health.py on real captures (tests/fixtures and the shared
fixtures; sources in tests/fixtures/SOURCES.md): what each capture's board shows, written here by hand from the
capture, never computed by the rule."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_xml import parse_nvsmi_xml
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_health as H

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures')
SETTINGS = {'nodeprep_readiness_thresholds': {}, 'nodeprep_readiness_mig': 'disabled'}


def xml(name):
    with open(os.path.join(FIXTURES, 'nvidia-smi-xml', name)) as handle:
        return {'nvidia': parse_nvsmi_xml(handle.read())}


def capture(name):
    with open(os.path.join(FIXTURES, 'nvlink', name)) as handle:
        # the ml-engineering excerpt elides links with a "[...]" line
        return ''.join(line for line in handle.read().splitlines(True) if line.strip() != '[...]')


def with_nvlink(facts, status='', errors=''):
    facts['nvidia']['nvlink'] = {'status': {'rc': 0, 'stdout': status, 'stderr': '', 'error': None},
                                 'errors': {'rc': 0, 'stdout': errors, 'stderr': '', 'error': None}}
    return facts


def settings(**kwargs):
    out = dict(SETTINGS)
    out.update(kwargs)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# healthy captures: every new check passes (or skips where the board has nothing to judge)

@pytest.mark.parametrize('name, throttle, pci, remapped, mig, vbios', [
    ('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml', 'no clock slowdown on 8 GPUs', 'all 8 GPUs at x16 Gen5',
     'none pending or failed on 8 GPUs; 0 rows uncorrectable remapped', 'MIG disabled on 8 GPUs',
     'VBIOS 96.00.99.00.01 on 8 GPUs'),
    ('b200-8gpu_k8s-test-infra.xml', 'no clock slowdown on 8 GPUs', 'all 8 GPUs at x16 Gen5',
     'none pending or failed on 8 GPUs; 0 rows uncorrectable remapped', 'MIG disabled on 8 GPUs',
     'VBIOS 97.00.FA.00.09 on 8 GPUs'),
    ('gb200-4gpu-arm64_k8s-test-infra.xml', 'no clock slowdown on 4 GPUs', 'all 4 GPUs at x16 Gen5',
     'none pending or failed on 4 GPUs; 0 rows uncorrectable remapped', 'MIG disabled on 4 GPUs',
     'VBIOS 97.00.B9.00.69 on 4 GPUs'),
    ('gb300-4gpu_k8s-test-infra.xml', 'no clock slowdown on 4 GPUs', 'all 4 GPUs at x16 Gen6',
     'none pending or failed on 4 GPUs; 0 rows uncorrectable remapped', 'MIG disabled on 4 GPUs', None),
])
def test_healthy_data_centre_captures_pass(name, throttle, pci, remapped, mig, vbios):
    facts = xml(name)
    assert H.throttle(facts, SETTINGS)[::2] == ('pass', throttle)
    assert H.pcie_link(facts, SETTINGS)[::2] == ('pass', pci)
    assert H.remapped_rows(facts, SETTINGS)[::2] == ('pass', remapped)
    assert H.mig(facts, SETTINGS)[::2] == ('pass', mig)
    if vbios:
        assert H.vbios(facts, SETTINGS)[::2] == ('pass', vbios)


def test_idle_gpu_at_gen1_with_full_width_is_power_saving():
    # RTX A5000 pair, both idle at Gen1 of Gen4, x16 (telegraf capture)
    facts = xml('rtx-a5000-2gpu_telegraf.xml')
    assert H.pcie_link(facts, SETTINGS)[::2] == (
        'pass', 'all 2 GPUs at x16 Gen1; GPU 0 (00000000:81:00.0) at Gen1 of Gen4 while idle (power saving); '
                'GPU 1 (00000000:C1:00.0) at Gen1 of Gen4 while idle (power saving)')


def test_busy_gpu_below_its_generation_warns():
    # RTX 3090 (telegraf, v13 layout): SW Power Cap Active (not idle), Gen1 of Gen4, x16
    facts = xml('rtx-3090-1gpu-v13_telegraf.xml')
    assert H.pcie_link(facts, SETTINGS)[::2] == (
        'warn', 'GPU 0 (00000000:09:00.0): PCIe Gen1, below its Gen4 maximum while not idle (x16; the host<->device '
                'bandwidth gate judges it under load)')
    # SW Power Cap is the power limit: not a slowdown
    assert H.throttle(facts, SETTINGS)[0] == 'pass'


def test_l40s_slot_wired_x8_warns_unless_the_site_says():
    # L40S (k8s-test-infra): x8 of x16, Gen4; a PCIe card outside the model table
    facts = xml('l40s-1gpu_k8s-test-infra.xml')
    status, _expected, observed = H.pcie_link(facts, SETTINGS)
    assert (status, observed) == ('warn', 'GPU 0 (00000000:30:00.0): PCIe link x8 (Gen4), below x16 lanes (the link '
                                          'maximum; a slot wired narrower? set '
                                          'nodeprep_readiness_thresholds.pcie_width)')
    assert H.pcie_link(facts, settings(nodeprep_readiness_thresholds={'pcie_width': 8}))[0] == 'pass'
    assert H.pcie_link(facts, settings(nodeprep_readiness_thresholds={'pcie_width': 16}))[::2] == (
        'fail', 'GPU 0 (00000000:30:00.0): PCIe link x8 (Gen4), below x16 lanes '
                '(nodeprep_readiness_thresholds.pcie_width)')


def test_hgx_capture_narrowed_fails_against_the_model():
    facts = xml('h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml')
    facts['nvidia']['gpus'][3]['pcie'].update(width_current=8, width_max=8)
    assert H.pcie_link(facts, SETTINGS)[::2] == (
        'fail', 'GPU 3 (00000000:86:00.0): PCIe link x8 (Gen5), below x16 lanes (model h100-sxm, source captures)')


def test_mig_capture():
    # A100 SXM4 80GB (telegraf) with MIG on
    facts = xml('a100-sxm4-1gpu_telegraf.xml')
    assert H.mig(facts, SETTINGS)[::2] == ('fail', 'GPU 0 (00000000:01:00.0): MIG Enabled current, Enabled pending')
    assert H.mig(facts, settings(nodeprep_readiness_mig='enabled'))[::2] == ('pass', 'MIG enabled on 1 GPU')
    assert H.mig(facts, settings(nodeprep_readiness_mig='any'))[0] == 'skip'
    # a GeForce card has no MIG mode
    assert H.mig(xml('rtx-4090-1gpu_netdata.xml'), SETTINGS)[::2] == ('skip', 'no GPU supports MIG')


def test_vbios_differs_on_a_k80_board():
    # Tesla K80 x4 (pai capture): two VBIOS versions
    facts = xml('tesla-k80-4gpu_pai.xml')
    assert H.vbios(facts, SETTINGS)[::2] == (
        'warn', '2 VBIOS versions: 80.21.1F.00.05 on GPU 0 (00001580:00:00.0), GPU 1 (00002DF7:00:00.0); '
                '80.21.1F.00.06 on GPU 2 (00004968:00:00.0), GPU 3 (0000F8D6:00:00.0)')


def test_pre_ampere_has_no_row_remapping():
    assert H.remapped_rows(xml('tesla-v100-pcie-1gpu_datakit.xml'), SETTINGS)[::2] == (
        'skip', 'no row remapping on these GPUs (before Ampere)')


def test_throttle_on_a_capture_with_a_slowdown_set():
    facts = xml('b200-8gpu_k8s-test-infra.xml')
    facts['nvidia']['gpus'][5]['clocks_event_reasons'].update(gpu_idle=False, hw_slowdown=True,
                                                              hw_thermal_slowdown=True)
    status, _expected, observed = H.throttle(facts, SETTINGS)
    assert status == 'fail'
    assert observed.startswith('GPU 5 (00000000:')
    assert 'HW Slowdown, HW Thermal Slowdown Active (graphics clock ' in observed


def test_no_reasons_reported_skips():
    facts = xml('b200-8gpu_k8s-test-infra.xml')
    for gpu in facts['nvidia']['gpus']:
        gpu['clocks_event_reasons'] = None
    assert H.throttle(facts, SETTINGS)[::2] == (
        'skip', 'nvidia-smi reports no clock event reasons (driver too old) on 8 GPUs')


# ---------------------------------------------------------------------------------------------------------------------
# NVLink on the real nvlink -s / -e captures


def gpus_of(count, name):
    return {'nvidia': {'gpus': [{'index': i, 'pci_bus_id': '00000000:{0:02X}:00.0'.format(16 + i), 'name': name}
                                for i in range(count)]}}


@pytest.mark.parametrize('name, count, model, status, observed', [
    ('a100-sxm4-80gb-8gpu_nvlink-s_gpud.txt', 8, 'NVIDIA A100-SXM4-80GB', 'pass',
     '8 of 8 GPUs with all 12 NVLinks active (NVIDIA A100-SXM4-80GB)'),
    ('h100-sxm-1gpu-drv590.48.01_nvlink-s_nvidia_gpu_exporter.txt', 1, 'NVIDIA H100 80GB HBM3', 'pass',
     '1 of 1 GPUs with all 18 NVLinks active (NVIDIA H100 80GB HBM3)'),
    # an NVLink-bridged H100 PCIe pair: 6 of 18 links inactive by design; no board count for PCIe cards
    ('h100-pcie-2gpu-drv555.42.02_nvlink-s-bridge_hpe-e-learning.txt', 2, 'NVIDIA H100 PCIe', 'skip',
     'no NVLink count known for NVIDIA H100 PCIe (nodeprep_readiness_thresholds.nvlinks)'),
    ('a10-1gpu_nvlink-s-empty_gpud.txt', 1, 'NVIDIA A10', 'skip',
     'no NVLink count known for NVIDIA A10 (nodeprep_readiness_thresholds.nvlinks)'),
])
def test_nvlink_status_captures(name, count, model, status, observed):
    facts = with_nvlink(gpus_of(count, model), capture(name))
    assert H.nvlinks(facts, SETTINGS)[::2] == (status, observed)


def test_nvlink_all_inactive_capture():
    # Azure's A100 SXM4 capture: GPU 6 says NVML's "all links are inactive"
    text = capture('a100-sxm4-80gb-1gpu_nvlink-s-all-inactive_azurehpc-health-checks.txt')
    facts = with_nvlink({'nvidia': {'gpus': [{'index': 6, 'pci_bus_id': '00000000:D1:00.0',
                                              'name': 'NVIDIA A100-SXM4-80GB'}]}}, text)
    assert H.nvlinks(facts, SETTINGS)[::2] == ('fail', 'GPU 6 (00000000:D1:00.0): all NVLinks inactive, 12 wanted '
                                                       '(oci-hpc)')


def test_nvlink_bridge_judged_when_the_site_gives_a_count():
    facts = with_nvlink(gpus_of(2, 'NVIDIA H100 PCIe'),
                        capture('h100-pcie-2gpu-drv555.42.02_nvlink-s-bridge_hpe-e-learning.txt'))
    status, _expected, observed = H.nvlinks(facts, settings(nodeprep_readiness_thresholds={'nvlinks': 12}))
    assert status == 'pass' and observed == '2 of 2 GPUs with all 12 NVLinks active (NVIDIA H100 PCIe)'
    status, _expected, observed = H.nvlinks(facts, settings(nodeprep_readiness_thresholds={'nvlinks': 18}))
    assert status == 'fail'
    assert observed.startswith('GPU 0 (00000000:10:00.0): links 4, 5, 10, 11, 16, 17 inactive; 12 of 18 links '
                               'active (nodeprep_readiness_thresholds.nvlinks); GPU 1 (00000000:11:00.0): links ')


def test_nvlink_errors_capture_and_a_slow_link():
    status_text = capture('h100-sxm-1gpu-drv590.48.01_nvlink-s_nvidia_gpu_exporter.txt')
    errors_text = capture('h100-sxm_nvlink-e-excerpt_ml-engineering.txt')
    facts = with_nvlink(gpus_of(1, 'NVIDIA H100 80GB HBM3'), status_text, errors_text)
    assert H.nvlinks(facts, SETTINGS)[::2] == (
        'pass', '1 of 1 GPUs with all 18 NVLinks active (NVIDIA H100 80GB HBM3); error counters within the thresholds '
                'on 1 GPU')
    facts = with_nvlink(gpus_of(1, 'NVIDIA H100 80GB HBM3'), status_text,
                        errors_text.replace('Link 1: Replay Errors: 0', 'Link 1: Replay Errors: 3'))
    assert H.nvlinks(facts, SETTINGS)[::2] == (
        'fail', 'GPU 0 (00000000:10:00.0) link 1: 3 Replay Errors, above 0 (dcgm-health; counted since the driver '
                'loaded)')
    relaxed = settings(nodeprep_readiness_thresholds={'nvlink_replay_errors_max': 5})
    assert H.nvlinks(facts, relaxed)[0] == 'pass'
    assert H.nvlinks(facts, settings(nodeprep_readiness_thresholds={'nvlink_gbps': 30.0}))[::2] == (
        'fail', 'GPU 0 (00000000:10:00.0): ' + ', '.join('link {0} at 26.562 GB/s'.format(n) for n in range(18))
        + ' below 30 GB/s per link (nodeprep_readiness_thresholds.nvlink_gbps); GPU 0 (00000000:10:00.0) link 1: '
          '3 Replay Errors, above 0 (dcgm-health; counted since the driver loaded)')


def test_nvlink_not_read_or_unparsable():
    facts = gpus_of(1, 'NVIDIA H100 80GB HBM3')
    assert H.nvlinks(facts, SETTINGS)[::2] == ('skip', 'nvidia-smi nvlink was not read')
    facts = with_nvlink(gpus_of(1, 'NVIDIA H100 80GB HBM3'), 'Link 0: 26.562 GB/s\n')
    status, _expected, observed = H.nvlinks(facts, SETTINGS)
    assert status == 'fail'
    assert observed.startswith('cannot parse nvidia-smi nvlink -s: line 1 ')
    facts['nvidia']['nvlink']['status'] = {'rc': None, 'stdout': '', 'stderr': '',
                                           'error': 'nvidia-smi nvlink -s did not answer within the timeout of 60 '
                                                    'seconds and was killed'}
    assert H.nvlinks(facts, SETTINGS)[::2] == (
        'fail', 'nvidia-smi nvlink -s did not answer within the timeout of 60 seconds and was killed')


# ---------------------------------------------------------------------------------------------------------------------
# settings


@pytest.mark.parametrize('given, problems', [
    ({}, []),
    ({'nodeprep_readiness_thresholds': {'nvlinks': 8, 'nvlink_crc_errors_max': 0}}, []),
    ({'nodeprep_readiness_thresholds': {'nvlink': 8}},
     ['nodeprep_readiness_thresholds.nvlink: not a threshold (allowed: nvlinks, ']),
    ({'nodeprep_readiness_thresholds': {'pcie_width': 0}},
     ['nodeprep_readiness_thresholds.pcie_width=0: a threshold is a number above 0']),
    ({'nodeprep_readiness_thresholds': {'nvlink_replay_errors_max': -1}},
     ['nodeprep_readiness_thresholds.nvlink_replay_errors_max=-1: a count of errors is a whole number, 0 or more']),
    ({'nodeprep_readiness_thresholds': ['nvlinks']},
     ["nodeprep_readiness_thresholds=['nvlinks']: expected a dict of threshold -> number"]),
    ({'nodeprep_readiness_mig': 'off'}, ["nodeprep_readiness_mig='off': allowed: disabled, enabled, any"]),
])
def test_settings_problems(given, problems):
    got = H.settings_problems(settings(**given))
    assert len(got) == len(problems)
    for text, start in zip(got, problems):
        assert text.startswith(start), text
