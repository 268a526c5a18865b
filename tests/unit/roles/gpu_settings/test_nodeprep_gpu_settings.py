# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests for roles/gpu_settings/files/nodeprep-gpu-settings (the boot-time re-apply script)."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.machinery
import importlib.util
import io
import json
import os

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'roles', 'gpu_settings', 'files',
                      'nodeprep-gpu-settings')


def _load():
    loader = importlib.machinery.SourceFileLoader('nodeprep_gpu_settings', SCRIPT)
    spec = importlib.util.spec_from_loader('nodeprep_gpu_settings', loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


script = _load()

QUERY = ['nvidia-smi', '--query-gpu=index,uuid,pci.bus_id,power.default_limit,power.min_limit,power.max_limit',
         '--format=csv,noheader,nounits']
# Two B200-like GPUs: 1000 W default, 200-1000 W range (values as nvidia-smi prints them with nounits).
QUERY_OUT = ('0, GPU-aaaa, 00000000:1B:00.0, 1000.00, 200.00, 1000.00\n'
             '1, GPU-bbbb, 00000000:43:00.0, 1000.00, 200.00, 1000.00\n')


class FakeRunner(object):
    def __init__(self, results=None):
        self.calls = []
        self.results = results or {}

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv == QUERY:
            return self.results.get('query', (0, QUERY_OUT, ''))
        return self.results.get(tuple(argv), (0, '', ''))


def _run(tmp_path, config, results=None, dry_run=False):
    path = tmp_path / 'gpu-settings.json'
    path.write_text(json.dumps(config) if not isinstance(config, str) else config)
    runner = FakeRunner(results)
    out, err = io.StringIO(), io.StringIO()
    argv = (['--dry-run'] if dry_run else []) + [str(path)]
    rc = script.main(argv, run=runner, out=out, err=err)
    return rc, runner.calls, out.getvalue(), err.getvalue()


@pytest.mark.parametrize('config, expected', [
    ({'gpus': 'all'}, []),
    ({'gpus': 'all', 'persistence_mode': True},
     [['nvidia-smi', '-i', '0', '-pm', '1'], ['nvidia-smi', '-i', '1', '-pm', '1']]),
    ({'gpus': ['1'], 'power_limit': '70%'}, [['nvidia-smi', '-i', '1', '-pl', '700']]),
    ({'gpus': ['GPU-AAAA'], 'power_limit': 650}, [['nvidia-smi', '-i', '0', '-pl', '650']]),
    ({'gpus': ['0000:43:00.0'], 'power_limit': '62.5%'}, [['nvidia-smi', '-i', '1', '-pl', '625']]),
    ({'gpus': ['00000000:1B:00.0'], 'power_limit': 1500, 'power_limit_clamp': True},
     [['nvidia-smi', '-i', '0', '-pl', '1000']]),
    ({'gpus': ['0'], 'power_limit': '10%', 'power_limit_clamp': True}, [['nvidia-smi', '-i', '0', '-pl', '200']]),
    ({'gpus': ['0'], 'locked_gpu_clocks': {'min': 1200, 'max': 1965}, 'locked_memory_clocks': {'min': 3996, 'max': 3996},
      'applications_clocks': {'memory': 3996, 'graphics': 1965}},
     [['nvidia-smi', '-i', '0', '-lgc', '1200,1965'], ['nvidia-smi', '-i', '0', '-lmc', '3996,3996'],
      ['nvidia-smi', '-i', '0', '-ac', '3996,1965']]),
    ({'gpus': ['0'], 'locked_gpu_clocks': 'reset', 'locked_memory_clocks': None}, []),
    ({'gpus': ['0'], 'persistence_mode': False, 'nvidia_smi': '/usr/bin/nvidia-smi'},
     [['/usr/bin/nvidia-smi', '-i', '0', '-pm', '0']]),
])
def test_apply(tmp_path, config, expected):
    results = None
    if config.get('nvidia_smi'):
        results = {'query': (0, '', '')}
    rc, calls, out, err = _run(tmp_path, config)
    if config.get('nvidia_smi'):
        # a custom binary path is used for the query too
        assert calls[0][0] == '/usr/bin/nvidia-smi'
        return
    assert (rc, err) == (0, '')
    assert calls == [QUERY] + expected
    assert out == ''.join('ran: {0}\n'.format(' '.join(c)) for c in expected)


def test_dry_run_runs_only_the_query(tmp_path):
    rc, calls, out, err = _run(tmp_path, {'power_limit': '70%'}, dry_run=True)
    assert (rc, calls, err) == (0, [QUERY], '')
    assert out == 'would run: nvidia-smi -i 0 -pl 700\nwould run: nvidia-smi -i 1 -pl 700\n'


@pytest.mark.parametrize('config, rc, message', [
    ('{not json', 2, 'is not valid JSON'),
    ('[]', 2, 'must hold a JSON object, found list'),
    ({'gpus': ['7']}, 2, "GPU '7' from \"gpus\" is not present; present: 0, 1"),
    ({'gpus': 'some'}, 2, 'nodeprep-gpu-settings: "gpus" must be "all" or a list of index/uuid/PCI bus id, found \'some\''),
    ({'locked_gpu_clocks': {'min': 1}}, 2,
     'nodeprep-gpu-settings: "locked_gpu_clocks" must be {"min": MHz, "max": MHz}, "reset" or null, found {\'min\': 1}'),
    ({'gpus': ['0'], 'power_limit': 1500}, 1,
     "nodeprep-gpu-settings: GPU 0: power_limit 1500 (1500.00 W) is outside 200.00-1000.00 W and power_limit_clamp is false\n"),
    ({'gpus': ['0'], 'power_limit': 'lots'}, 1,
     "nodeprep-gpu-settings: power_limit 'lots' is neither watts (a positive number) nor a percentage such as \"70%\"\n"),
])
def test_errors(tmp_path, config, rc, message):
    got_rc, calls, out, err = _run(tmp_path, config)
    assert got_rc == rc
    assert message in err
    # nothing but the query ran
    assert all(c == QUERY for c in calls)


def test_missing_config(tmp_path):
    err = io.StringIO()
    rc = script.main([str(tmp_path / 'absent.json')], run=FakeRunner(), out=io.StringIO(), err=err)
    assert rc == 2
    assert err.getvalue().startswith('nodeprep-gpu-settings: cannot read {0}: '.format(tmp_path / 'absent.json'))


def test_query_failure(tmp_path):
    rc, calls, out, err = _run(tmp_path, {'persistence_mode': True},
                               results={'query': (9, '', 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.')})
    assert (rc, calls) == (1, [QUERY])
    assert err == ('nodeprep-gpu-settings: nvidia-smi --query-gpu=index,uuid,pci.bus_id,power.default_limit,'
                   'power.min_limit,power.max_limit --format=csv,noheader,nounits failed (rc=9): NVIDIA-SMI has failed '
                   'because it could not communicate with the NVIDIA driver.\n')


def test_command_failure_continues(tmp_path):
    failing = ('nvidia-smi', '-i', '0', '-lgc', '100,200')
    rc, calls, out, err = _run(tmp_path, {'locked_gpu_clocks': {'min': 100, 'max': 200}},
                               results={failing: (3, '', 'Invalid combination of clocks')})
    assert rc == 1
    assert calls == [QUERY, list(failing), ['nvidia-smi', '-i', '1', '-lgc', '100,200']]
    assert err == 'nodeprep-gpu-settings: nvidia-smi -i 0 -lgc 100,200 failed (rc=3): Invalid combination of clocks\n'
    assert out == 'ran: nvidia-smi -i 1 -lgc 100,200\n'
