# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The dcgmi double (tests/testbed/gpu_double/lib/dcgmi_double.py) against the collection's own DCGM parsers and the
real captures' layout: what gpu.dcgm_diag reads from it on a converged node, with persistence off, with the fault."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import sys

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _dcgm
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dcgmi
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _dcgmi_cli
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FIXTURES
from ansible_collections.gpufleet.nodeprep.tests.unit.testbed import test_gpu_double

DOUBLE = test_gpu_double.DOUBLE
# The GPU double's node fixture (a node root with the double installed).
node = test_gpu_double.node

sys.path.insert(0, os.path.join(DOUBLE, 'lib'))

import dcgmi_double as dd  # noqa: E402
import gpudouble as gd  # noqa: E402


def run(capsys, *argv):
    rc = dd.main(list(argv))
    out = capsys.readouterr().out
    return rc, out


@pytest.fixture
def engine(node, monkeypatch):  # noqa: F811
    """A node with the driver loaded and the host engine 'running' (its marker holds this process's PID)."""
    node.ready('hgx-h100-8gpu')
    gd.ensure_state(gd.load_profile())
    gd.write_text(dd.HOSTENGINE_MARKER, '{0}\n'.format(os.getpid()))
    return node


def persistence_on():
    profile = gd.load_profile()
    state = gd.ensure_state(profile)
    for gpu in profile['gpus']:
        gd.gpu_state(state, profile, gpu['pci_bus_id'])['persistence'] = True
    gd.save_state(state)
    return profile


def probe(diag, discovery):
    return {'enabled': True, 'level': 1, 'timeout': 300, 'dcgmi': '/usr/bin/dcgmi',
            'discovery': {'rc': discovery[0], 'stdout': discovery[1], 'stderr': ''},
            'diag': {'rc': diag[0], 'stdout': diag[1], 'stderr': '', 'timed_out': False}}


def test_no_host_engine(node, capsys):  # noqa: F811
    node.ready('hgx-h100-8gpu')
    rc, out = run(capsys, 'discovery', '-l')
    assert rc == 235
    assert _dcgmi_cli.no_host_engine(out)
    status, _expected, observed = _dcgm.judge(probe((0, ''), (rc, out)), [])
    # the diagnostic was asked for (probe enabled): a stopped host engine fails, naming the unit (it skipped before)
    assert status == 'fail' and 'host engine is not running (nvidia-dcgm.service not active' in observed


def test_converged_node_passes(engine, capsys):
    profile = persistence_on()
    discovery = run(capsys, 'discovery', '-l')
    diag = run(capsys, 'diag', '-r', '1', '-j')
    assert diag[0] == 0
    found = _dcgmi.parse_discovery(discovery[1])
    assert (found['gpu_count'], found['nvswitch_count']) == (8, 4)
    assert [g['pci_bus_id'] for g in found['gpus']] == [g['pci_bus_id'] for g in profile['gpus']]
    gpus = [dict(index=g['index'], pci_bus_id=g['pci_bus_id']) for g in profile['gpus']]
    status, _expected, observed = _dcgm.judge(probe(diag, discovery), gpus)
    assert (status, observed) == ('pass', 'DCGM 4.5.2: 8 results of software (DCGM sees 8 GPUs and 4 NVSwitches); '
                                          'all passed')


def test_the_layout_is_the_real_capture_layout(engine, capsys):
    """jsoncpp's StyledWriter, as the GB10 capture: the same lines for the same content."""
    with open(os.path.join(FIXTURES, 'dcgmi', 'gb10-1gpu-dcgm4.2.3-diag-r1-persistence-off.json')) as f:
        real = f.read()
    loaded = json.loads(real)
    assert dd.styled(loaded) == real
    rc, out = run(capsys, 'diag', '-r', '1', '-j')
    doc = json.loads(out)
    assert sorted(doc) == sorted(loaded)
    assert sorted(doc['DCGM Diagnostic']) == sorted(loaded['DCGM Diagnostic'])
    ours = doc['DCGM Diagnostic']['test_categories'][0]['tests'][0]['results'][0]
    theirs = loaded['DCGM Diagnostic']['test_categories'][0]['tests'][0]['results'][0]
    assert sorted(ours) == sorted(theirs)
    assert ours['warnings'][0] == dict(theirs['warnings'][0])   # GPU 0, persistence off: the same words
    assert rc == 226


def test_persistence_off_fails_every_gpu_and_says_so(engine, capsys):
    profile = gd.load_profile()
    diag = run(capsys, 'diag', '-r', '1', '-j')
    gpus = [dict(index=g['index'], pci_bus_id=g['pci_bus_id']) for g in profile['gpus']]
    status, _expected, observed = _dcgm.judge(probe(diag, (1, '')), gpus)
    assert status == 'fail'
    assert observed.startswith('persistence mode is off (GPU 0 (00000000:53:00.0), GPU 1 ')
    assert 'GPU 7 (' in observed


def test_the_fault_fails_the_software_test_on_the_gpu_it_names(engine, capsys):
    profile = persistence_on()
    engine.fault(dd.FAULT_DIAG_FAIL, '3\n')
    discovery = run(capsys, 'discovery', '-l')
    diag = run(capsys, 'diag', '-r', '1', '-j')
    assert diag[0] == 226
    gpus = [dict(index=g['index'], pci_bus_id=g['pci_bus_id']) for g in profile['gpus']]
    status, _expected, observed = _dcgm.judge(probe(diag, discovery), gpus)
    assert status == 'fail'
    bus = profile['gpus'][3]['pci_bus_id']
    assert observed.startswith('GPU 3 ({0}): software failed: Page Retirement/Row Remap: GPU 3 had memory errors and '
                               'row remappings are pending Check DCGM and system logs for errors. Reset GPU. Restart '
                               'DCGM. Rerun diagnostics. [error 85, severity RESET]'.format(bus))
    assert 'GPU 2 (' not in observed


def test_the_fault_defaults_to_the_last_gpu(engine, capsys):
    persistence_on()
    engine.fault(dd.FAULT_DIAG_FAIL)
    diag = run(capsys, 'diag', '-r', '1', '-j')
    failed = [r for r in _dcgmi.parse_diag(diag[1])['results'] if r['status'] == 'Fail']
    assert [r['entity_id'] for r in failed] == [7]


@pytest.mark.parametrize('level, tests', [('1', 1), ('2', 3), ('3', 7), ('4', 9)])
def test_levels_add_tests(engine, capsys, level, tests):
    persistence_on()
    rc, out = run(capsys, 'diag', '-r', level, '-j')
    assert rc == 0
    assert len(_dcgmi.parse_diag(out)['summaries']) == tests


def test_a_lost_gpu_is_missing_from_dcgm(engine, capsys):
    profile = persistence_on()
    engine.fault(gd.FAULT_GPU_MISSING, '2\n')
    discovery = run(capsys, 'discovery', '-l')
    diag = run(capsys, 'diag', '-r', '1', '-j')
    gpus = [dict(index=g['index'], pci_bus_id=g['pci_bus_id']) for g in profile['gpus']]
    status, _expected, observed = _dcgm.judge(probe(diag, discovery), gpus)
    assert status == 'fail'
    assert observed.startswith('DCGM sees 7 GPUs, nvidia-smi lists 8')
