# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.filter.shm_predict import FilterModule, nodeprep_shm_plan, shm_predict

G = 1024 ** 3


def test_registered():
    assert FilterModule().filters()['shm_predict'] is shm_predict


def test_fresh_node():
    got = shm_predict({'size_bytes': 12 * G, 'unlimited': False, 'fstab': None}, str(64 * G), ['nosuid', 'nodev'])
    assert got['fstab'] is True and got['live'] is True and got['exact'] is True
    assert got['fstab_reasons'][0] == 'no /dev/shm line in fstab'


@pytest.mark.parametrize('shm, min_bytes, options, message', [
    ([], 1, [], 'input must be ansible_facts.shm'),
    ({}, 'half', [], 'min_bytes must be a number of bytes'),
    ({}, 1, 'nosuid', 'mount_options must be a list'),
])
def test_refusals(shm, min_bytes, options, message):
    with pytest.raises(AnsibleFilterError, match=message):
        shm_predict(shm, min_bytes, options)


# nodeprep_shm_plan: the shm role's decision (the role's decision table, roles/shm/tests/decisions.yml, runs the same
# function through the role's variables).

SETTINGS = {'size': None, 'min_size': '64G', 'gpu_memory_ratio': 1.0, 'mount_options': ['nosuid', 'nodev'],
            'fstab': True, 'remount': True, 'shrink': False, 'path': '/dev/shm', 'sized': True}
FSTAB_64G = {'options': ['nosuid', 'nodev', 'size=64g'], 'size_bytes': 64 * G, 'unlimited': False}


def test_plan_derives_the_size_from_gpu_memory_rounded_up_to_a_gib():
    got = nodeprep_shm_plan({'size_bytes': 32 * G, 'unlimited': False, 'fstab': None}, [81559] * 8, SETTINGS)
    assert got['gpu_bytes'] == 81559 * 8 * 1024 ** 2
    assert got['target'] == 638 * G
    assert got['size_opt'] == '638g'
    assert got['plan'] == ['fstab: /dev/shm size=638g', 'live: /dev/shm to {0} bytes'.format(638 * G)]


def test_plan_never_goes_below_the_minimum_size():
    got = nodeprep_shm_plan({'size_bytes': 64 * G, 'unlimited': False, 'fstab': FSTAB_64G}, [], SETTINGS)
    assert got['target'] == 64 * G
    assert got['plan'] == []


def test_plan_keeps_a_larger_live_size_and_writes_it_to_fstab():
    got = nodeprep_shm_plan({'size_bytes': 1024 * G, 'unlimited': False, 'fstab': FSTAB_64G}, [],
                            dict(SETTINGS, size='64G'))
    assert got['keep_live'] is True
    assert got['write_bytes'] == 1024 * G
    assert got['plan'] == ['fstab: /dev/shm size=1024g']


def test_plan_with_shrink_makes_it_smaller():
    got = nodeprep_shm_plan({'size_bytes': None, 'unlimited': True, 'fstab': None}, [],
                            dict(SETTINGS, size='64G', shrink=True))
    assert got['keep_live'] is False
    assert got['plan'] == ['fstab: /dev/shm size=64g', 'live: /dev/shm to {0} bytes'.format(64 * G)]


def test_plan_rounds_an_explicit_size_up_to_a_page():
    got = nodeprep_shm_plan({'size_bytes': 0, 'unlimited': False, 'fstab': None}, [], dict(SETTINGS, size='1.5k'))
    assert got['target'] == 4096
    assert got['size_opt'] == '4k'


def test_plan_is_empty_when_no_size_can_be_decided():
    got = nodeprep_shm_plan({'size_bytes': 1, 'unlimited': False, 'fstab': None}, [], dict(SETTINGS, sized=False))
    assert got['plan'] == []
    assert got['fstab_differs'] is True


def test_plan_refuses_a_size_it_cannot_read():
    with pytest.raises(AnsibleFilterError) as err:
        nodeprep_shm_plan({}, [], dict(SETTINGS, size='lots'))
    assert "nodeprep_shm_size: 'lots' is not a size; use bytes or a number with K, M, G or T" in str(err.value)
    with pytest.raises(AnsibleFilterError):
        nodeprep_shm_plan({}, '80G', SETTINGS)
