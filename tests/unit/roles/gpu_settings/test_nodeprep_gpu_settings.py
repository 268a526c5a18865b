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

SMI = '/usr/bin/nvidia-smi'
BUS = ['00000000:1B:00.0', '00000000:43:00.0']


def replay(commands, locks=None, record_path=None):
    return {'version': 1, 'commands': commands, 'locks': locks or {}, 'record_path': record_path}


class FakeRunner(object):
    def __init__(self, results=None):
        self.calls = []
        self.results = results or {}

    def __call__(self, argv):
        self.calls.append(list(argv))
        return self.results.get(tuple(argv), (0, 'All done.\n', ''))


def _run(tmp_path, content, results=None, dry_run=False):
    path = tmp_path / 'gpu-settings.replay'
    path.write_text(json.dumps(content) if not isinstance(content, str) else content)
    runner = FakeRunner(results)
    out, err = io.StringIO(), io.StringIO()
    argv = (['--dry-run'] if dry_run else []) + [str(path)]
    rc = script.main(argv, run=runner, out=out, err=err, boot_id=lambda: 'boot-2')
    return rc, runner.calls, out.getvalue(), err.getvalue()


def test_replays_exactly_the_commands_in_order(tmp_path):
    commands = [[SMI, '-i', BUS[0], '-pl', '670'], [SMI, '-i', BUS[1], '-pl', '670'],
                [SMI, '-i', BUS[0], '-lgc', '1500,1965']]
    rc, calls, out, err = _run(tmp_path, replay(commands))
    assert (rc, calls, err) == (0, commands, '')
    assert out.splitlines() == ['ran: ' + ' '.join(c) for c in commands]


def test_no_query_and_no_persistence_mode_of_its_own(tmp_path):
    # The old script queried nvidia-smi, re-derived the watts and always ran -pm 1; the replay holds neither.
    rc, calls, out, err = _run(tmp_path, replay([[SMI, '-i', BUS[0], '-pl', '501']]))
    assert calls == [[SMI, '-i', BUS[0], '-pl', '501']]


def test_records_the_locks_after_success(tmp_path):
    record = tmp_path / 'run' / 'nvidia_gpu_locks.json'
    locks = {BUS[0]: {'uuid': 'GPU-aaaa', 'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}}}
    rc, calls, out, err = _run(tmp_path, replay([[SMI, '-i', BUS[0], '-lgc', '1500,1965']], locks, str(record)))
    assert rc == 0
    assert json.loads(record.read_text()) == {'boot_id': 'boot-2', 'gpus': locks}


def test_records_nothing_when_a_command_failed(tmp_path):
    record = tmp_path / 'run' / 'nvidia_gpu_locks.json'
    locks = {BUS[0]: {'uuid': 'GPU-aaaa', 'locked_gpu_clocks': {'min_mhz': 1500, 'max_mhz': 1965}}}
    bad = [SMI, '-i', BUS[0], '-lgc', '1500,1965']
    rc, calls, out, err = _run(tmp_path, replay([[SMI, '-i', BUS[0], '-pl', '501'], bad, [SMI, '-i', BUS[1], '-pl',
                                                                                          '501']],
                                                locks, str(record)),
                               results={tuple(bad): (3, '', 'Setting locked clocks is not supported\n')})
    assert rc == 1
    assert len(calls) == 3  # it goes on with the other commands
    assert err == ('nodeprep-gpu-settings: /usr/bin/nvidia-smi -i 00000000:1B:00.0 -lgc 1500,1965 failed (rc=3): '
                   'Setting locked clocks is not supported\n')
    assert not record.exists()


def test_dry_run_runs_nothing(tmp_path):
    rc, calls, out, err = _run(tmp_path, replay([[SMI, '-i', BUS[0], '-pl', '501']]), dry_run=True)
    assert (rc, calls) == (0, [])
    assert out == 'would run: /usr/bin/nvidia-smi -i 00000000:1B:00.0 -pl 501\n'


@pytest.mark.parametrize('content, message', [
    ('{not json', 'is not valid JSON'),
    ({'commands': []}, 'is not a version 1 replay file written by gpufleet.nodeprep.nvidia_gpu'),
    ({'version': 1, 'commands': 'nvidia-smi -pl 500'}, '"commands" must be a list of argv lists (strings)'),
    ({'version': 1, 'commands': [['nvidia-smi', '-pl', 500]]}, '"commands" must be a list of argv lists (strings)'),
    ({'version': 1, 'commands': [], 'locks': []}, '"locks" must be an object'),
])
def test_unusable_replay(tmp_path, content, message):
    rc, calls, out, err = _run(tmp_path, content)
    assert (rc, calls) == (2, [])
    assert message in err


def test_missing_replay(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    rc = script.main([str(tmp_path / 'absent')], run=FakeRunner(), out=out, err=err)
    assert rc == 2
    assert err.getvalue().startswith('nodeprep-gpu-settings: cannot read ')
