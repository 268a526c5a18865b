# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""molecule/default/compare_runs.py: a check-mode run must predict the real run task by task."""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location('compare_runs', os.path.join(ROOT, 'molecule', 'default', 'compare_runs.py'))
compare_runs = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(compare_runs)


def run(check, hosts, playbook='converge.yml'):
    return {'playbook': playbook, 'check_mode': check,
            'hosts': {h: {'changed': list(t), 'failed': [], 'unreachable': False} for h, t in hosts.items()}}


CASES = [
    ('same tasks', {'n1': ['a', 'b']}, {'n1': ['b', 'a']}, []),
    ('task skipped in check mode', {'n1': ['a']}, {'n1': ['a', 'b']},
     ['n1: "b" changed 1 time(s) in the real run, check mode predicted 0']),
    ('task predicted but not changed', {'n1': ['a', 'b']}, {'n1': ['a']},
     ['n1: "b" changed 0 time(s) in the real run, check mode predicted 1']),
    ('counted, not only named', {'n1': ['a', 'a']}, {'n1': ['a']},
     ['n1: "a" changed 1 time(s) in the real run, check mode predicted 2']),
    ('host missing from one run', {'n1': []}, {'n1': [], 'n2': ['a']}, ['n2: only in the real run']),
]


@pytest.mark.parametrize('name, check, real, expected', CASES, ids=[c[0] for c in CASES])
def test_differences(name, check, real, expected):
    assert compare_runs.differences(run(True, check), run(False, real)) == expected


def test_a_failed_run_is_a_difference():
    real = run(False, {'n1': []})
    real['hosts']['n1']['failed'] = ['boom']
    assert compare_runs.differences(run(True, {'n1': []}), real) == ["n1: the real run failed: ['boom']"]


def test_modes_are_checked():
    assert compare_runs.differences(run(False, {}), run(True, {})) == [
        'the first run was not a check-mode run', 'the second run was a check-mode run']


def test_oldest_run_of_a_playbook(tmp_path):
    for name, data in (('1.json', run(False, {'n1': ['x']}, 'create.yml')),
                       ('2.json', run(False, {'n1': ['a']})),
                       ('3.json', run(False, {'n1': []}))):
        (tmp_path / name).write_text(json.dumps(data))
    assert compare_runs.oldest(str(tmp_path), 'converge.yml')['hosts']['n1']['changed'] == ['a']
    assert compare_runs.oldest(str(tmp_path))['playbook'] == 'create.yml'
    with pytest.raises(SystemExit):
        compare_runs.oldest(str(tmp_path), 'site.yml')
