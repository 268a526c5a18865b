# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nodeprep.plugins.filter.shm_predict import FilterModule, shm_predict

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
