# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_node_facts nvidia_nvlink: nvidia-smi nvlink -s and -e read in the same module run and returned as printed (a
fake nvidia-smi answering with the real captures of tests/fixtures); the controller parses them."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, fake_smi, run_main_rc

from ansible_collections.gpufleet.nodeprep.plugins.modules import gpu_node_facts

H100 = os.path.join(FIXTURES, 'nvidia-smi-xml', 'h100-sxm-80gb-hbm3-8gpu_k8s-test-infra.xml')
STATUS = os.path.join(FIXTURES, 'nvlink', 'h100-sxm-1gpu-drv590.48.01_nvlink-s_nvidia_gpu_exporter.txt')
ERRORS = os.path.join(FIXTURES, 'nvlink', 'h100-sxm_nvlink-e-excerpt_ml-engineering.txt')


def smi(tmp_path, errors='exec cat "{0}"'.format(ERRORS)):
    """A fake nvidia-smi: -q -x prints the XML capture, nvlink -s / -e the captures (or run ``errors``); every call
    is logged."""
    log = tmp_path / 'calls'
    return fake_smi(tmp_path, 'echo "$*" >> "{0}"\nif [ "$1 $2" = "nvlink -s" ]; then exec cat "{1}"; fi\n'
                              'if [ "$1 $2" = "nvlink -e" ]; then {2}; fi\nexec cat "{3}"'.format(
                                  log, STATUS, errors, H100)), log


def run(args, capsys):
    return run_main_rc(gpu_node_facts.main, args, capsys)


def read(path):
    with open(path) as handle:
        return handle.read()


def test_nvlink_raw_in_the_same_run(tmp_path, capsys):
    binary, log = smi(tmp_path)
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': binary, 'nvidia_nvlink': True,
                        'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get('msg')
    facts = result['ansible_facts']
    assert facts['nvidia']['nvlink'] == {
        'status': {'rc': 0, 'stdout': read(STATUS), 'stderr': '', 'error': None},
        'errors': {'rc': 0, 'stdout': read(ERRORS), 'stderr': '', 'error': None}}
    assert log.read_text().splitlines() == ['-q -x', 'nvlink -s', 'nvlink -e']
    assert sorted(facts['nodeprep_timings']) == ['nvidia', 'nvidia_nvlink']


def test_nvlink_not_asked_for_is_not_read(tmp_path, capsys):
    binary, log = smi(tmp_path)
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': binary, 'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get('msg')
    assert 'nvlink' not in result['ansible_facts']['nvidia']
    assert log.read_text().splitlines() == ['-q -x']


def test_nvlink_failure_and_hang_are_kept_not_raised(tmp_path, capsys):
    binary, _log = smi(tmp_path, errors='exec sleep 30')
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': binary, 'nvidia_nvlink': True,
                        'nvidia_timeout': 2, 'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get('msg')
    facts = result['ansible_facts']
    assert facts['nvidia']['nvlink']['status']['error'] is None
    assert facts['nvidia']['nvlink']['errors']['error'] == (
        '{0} nvlink -e did not answer within the timeout of 2 seconds and was killed'.format(binary))
    assert facts['nodeprep_errors'] == {} and len(facts['nvidia']['gpus']) == 8
