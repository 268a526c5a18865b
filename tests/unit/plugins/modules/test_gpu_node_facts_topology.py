# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_node_facts nvidia_topology: nvidia-smi topo -m read in the same module run (a fake nvidia-smi answering with
the real B200 captures of tests/fixtures) and parsed on the controller (_gather_resolve, as the action plugins do), and
parsers/_nvidia_smi_topo.topology_from_output."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES, fake_smi, run_main_rc

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nvidia_smi_topo import (
    TOPO_MAX_CHARS,
    parse_topo_matrix,
    topology_from_output,
    topology_from_read,
)
from ansible_collections.gpufleet.nodeprep.plugins.modules import gpu_node_facts
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._gather_resolve import resolve_gathered

B200 = os.path.join(FIXTURES, 'nvidia-smi-xml', 'b200-8gpu_k8s-test-infra.xml')
L40S = os.path.join(FIXTURES, 'nvidia-smi-xml', 'l40s-1gpu_k8s-test-infra.xml')
TOPO = os.path.join(FIXTURES, 'topo', 'b200-8gpu-8nic-nv18_topo-m_vllm-issue24513-excerpt.txt')


def smi(tmp_path, xml, topo='exec cat "{0}"'.format(TOPO)):
    """A fake nvidia-smi: -q -x prints the XML capture, topo -m runs ``topo``; every call is logged."""
    log = tmp_path / 'calls'
    return fake_smi(tmp_path, 'echo "$*" >> "{0}"\nif [ "$1" = topo ]; then {1}; fi\nexec cat "{2}"'.format(
        log, topo, xml)), log


def run(args, capsys):
    """The module, then the controller's parse of what it read (as gpu_node_facts' action plugin runs them)."""
    code, result = run_main_rc(gpu_node_facts.main, args, capsys)
    if code == 0:
        resolve_gathered(result['ansible_facts'], host='node01')
    return code, result


def test_topology_in_the_same_run(tmp_path, capsys):
    binary, log = smi(tmp_path, B200)
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': binary, 'nvidia_topology': True,
                        'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get('msg')
    facts = result['ansible_facts']
    with open(TOPO) as handle:
        assert facts['nvidia']['topology'] == {'matrix': parse_topo_matrix(handle.read()), 'error': None}
    assert log.read_text().splitlines() == ['-q -x', 'topo -m']
    assert sorted(facts['nodeprep_timings']) == ['nvidia', 'nvidia_topology']


def test_topology_not_asked_for_is_not_read(tmp_path, capsys):
    binary, log = smi(tmp_path, B200)
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': binary, 'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get('msg')
    assert 'topology' not in result['ansible_facts']['nvidia']
    assert log.read_text().splitlines() == ['-q -x']


def test_one_gpu_needs_no_topology(tmp_path, capsys):
    binary, log = smi(tmp_path, L40S)
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': binary, 'nvidia_topology': True}, capsys)
    assert code == 0, result.get('msg')
    assert 'topology' not in result['ansible_facts']['nvidia']
    assert log.read_text().splitlines() == ['-q -x']


def test_topology_failure_is_kept_not_raised(tmp_path, capsys):
    binary, _log = smi(tmp_path, B200, topo='echo "Failed to initialize NVML: Unknown Error" >&2; exit 255')
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': binary, 'nvidia_topology': True,
                        'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get('msg')
    facts = result['ansible_facts']
    assert facts['nvidia']['topology'] == {'matrix': None, 'error': '{0} topo -m exited with rc 255: Failed to '
                                                                    'initialize NVML: Unknown Error'.format(binary)}
    assert facts['nodeprep_errors'] == {}
    assert len(facts['nvidia']['gpus']) == 8


def test_topology_hang_is_killed(tmp_path, capsys):
    binary, _log = smi(tmp_path, B200, topo='exec sleep 30')
    code, result = run({'gather_subset': ['nvidia'], 'nvidia_smi': binary, 'nvidia_topology': True,
                        'nvidia_timeout': 2, 'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get('msg')
    assert result['ansible_facts']['nvidia']['topology']['error'] == (
        '{0} topo -m did not answer within the timeout of 2 seconds and was killed'.format(binary))


@pytest.mark.parametrize('rc, out, err, error', [
    (0, 'garbage\n', '', 'cannot parse the output of nvidia-smi topo -m: no header line starting with GPU0'),
    (9, '', '', 'nvidia-smi topo -m exited with rc 9: no output'),
])
def test_topology_from_output_errors(rc, out, err, error):
    got = topology_from_output(['nvidia-smi', 'topo', '-m'], rc, out, err)
    assert got['matrix'] is None
    assert got['error'].startswith(error)


def test_the_node_returns_the_output_the_controller_parses(tmp_path, capsys):
    binary, _log = smi(tmp_path, B200)
    code, result = run_main_rc(gpu_node_facts.main, {'gather_subset': ['nvidia'], 'nvidia_smi': binary,
                                                     'nvidia_topology': True, 'nvidia_supported_clocks': False}, capsys)
    assert code == 0, result.get('msg')
    read = result['ansible_facts']['nvidia']['topology']['read']
    with open(TOPO) as handle:
        assert read == {'argv': [binary, 'topo', '-m'], 'rc': 0, 'stdout': handle.read(), 'stderr': ''}


@pytest.mark.parametrize('read, error', [
    ({'argv': ['nvidia-smi', 'topo', '-m'], 'rc': 0, 'stdout': 'x' * (TOPO_MAX_CHARS + 1), 'stderr': ''},
     'host node01: nvidia-smi topo -m returned {0} characters, more than the {1} the gather returns'.format(
         TOPO_MAX_CHARS + 1, TOPO_MAX_CHARS)),
    ({'argv': ['nvidia-smi', 'topo', '-m'], 'rc': 0, 'stdout': None, 'stderr': ''},
     "host node01: the node's read of nvidia-smi topo -m is garbled (TypeError: "),
    ('GPU0 X', "host node01: the node's read of nvidia-smi topo -m is garbled (TypeError: "),
])
def test_an_oversized_or_garbled_read_is_the_topology_error(read, error):
    got = topology_from_read(read, 'node01')
    assert got['matrix'] is None and got['error'].startswith(error)
